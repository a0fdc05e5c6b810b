/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/store.h - coffer-store's server: listening socket, sessions, channels, event loop.
 * Context: one thread runs everything.
 */
#ifndef COFFER_TOOLS_STORE_H
#define COFFER_TOOLS_STORE_H

#include <stdint.h>
#include <sys/types.h>

struct coffer__store_cfg {
	uint64_t arena_bytes;	 /* -m */
	const char *socket_path; /* -s */
	const char *hugedir;	 /* -d, or NULL */
	int hugepages;		 /* enum coffer__hp_mode */
	mode_t socket_mode;	 /* --socket-mode, default 0600 */
	unsigned int spin_us; /* busy-poll after activity before sleeping (COFFER_STORE_SPIN_US) */
	unsigned int budget;  /* ring requests taken per client per round (fairness) */
	uint64_t sweep_us; /* poll every channel this often while awake (COFFER_STORE_SWEEP_US) */
};

/**
 * coffer__store_run() - create the arena, listen, serve until SIGTERM/SIGINT, clean up.
 * Prints one "coffer-store: ready ..." line on stderr once it accepts connections.
 * Return: 0 after a clean shutdown; 1 when start-up failed (message already logged).
 */
int coffer__store_run(const struct coffer__store_cfg *cfg);

#endif /* COFFER_TOOLS_STORE_H */
