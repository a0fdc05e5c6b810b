/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/list.h - intrusive circular doubly linked list for the store (single-threaded).
 * Shape of the Linux kernel's list_head.
 */
#ifndef COFFER_TOOLS_LIST_H
#define COFFER_TOOLS_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct coffer__dl {
	struct coffer__dl *prev, *next;
};

#define COFFER_DL_ENTRY(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void coffer__dl_init(struct coffer__dl *h)
{
	h->prev = h->next = h;
}

static inline bool coffer__dl_empty(const struct coffer__dl *h)
{
	return h->next == h;
}

/* A node that is not on any list points to itself (after init or del). */
static inline bool coffer__dl_linked(const struct coffer__dl *n)
{
	return n->next != n && n->next != NULL;
}

static inline void coffer__dl_add_tail(struct coffer__dl *h, struct coffer__dl *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void coffer__dl_del(struct coffer__dl *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#endif /* COFFER_TOOLS_LIST_H */
