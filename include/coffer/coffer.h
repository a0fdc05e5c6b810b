/* SPDX-License-Identifier: BSD-2-Clause */
/* coffer/coffer.h - umbrella header: everything a coffer client uses. */
#ifndef COFFER_COFFER_H
#define COFFER_COFFER_H

#include <coffer/common.h>
#include <coffer/hash.h>
#include <coffer/event.h>
#include <coffer/store.h>

#endif /* COFFER_COFFER_H */
