/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/fio/coffer_oid.h - the fio engine's data mapping: the ObjectID of a block.
 *
 * A block of fio file F in namespace NS at byte offset OFF is the store object whose
 * ObjectID is 12 bytes of hashes of (NS, F) followed by OFF as 8 little-endian bytes. The
 * engine (coffer_engine.c) and the fio suite's helper (tests/fio/fio_block.c) both name
 * blocks through this header, so that a test can reach exactly the objects fio uses.
 */
#ifndef COFFER_FIO_OID_H
#define COFFER_FIO_OID_H

#include <stdint.h>
#include <string.h>

#include <coffer/hash.h>
#include <coffer/store.h>

/* Bytes of an ObjectID that name the file; the other 8 are the block's offset. */
#define CF_PREFIX_SIZE (COFFER_OID_SIZE - 8)

/* 64-bit FNV-1a with a splitmix64 finaliser: the finaliser spreads FNV's weak high bits. */
static inline uint64_t cf_hash64(uint64_t seed, const char *a, const char *b)
{
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	const char *parts[2] = {a, b};

	for (int p = 0; p < 2; p++) {
		for (const unsigned char *s = (const unsigned char *)parts[p]; *s; s++) {
			h ^= *s;
			h *= 0x100000001b3ull;
		}
		/* separator: ("ab","c") and ("a","bc") must differ */
		h ^= 0xff;
		h *= 0x100000001b3ull;
	}
	return coffer_hash_mix64(h);
}

static inline void cf_store_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The 12 bytes that name file @file_name of namespace @ns (both NUL-terminated). */
static inline void cf_file_prefix(const char *ns, const char *file_name,
				  uint8_t prefix[CF_PREFIX_SIZE])
{
	uint64_t h1 = cf_hash64(0x636f66666572ull /* "coffer" */, ns, file_name);
	uint64_t h2 = cf_hash64(0x66696f2d6e73ull /* "fio-ns" */, ns, file_name);

	cf_store_le64(prefix, h1);
	for (int i = 0; i < 4; i++)
		prefix[8 + i] = (uint8_t)(h2 >> (8 * i));
}

/* The ObjectID of the block at byte @offset of the file named by @prefix. */
static inline void cf_prefix_block_oid(const uint8_t prefix[CF_PREFIX_SIZE], uint64_t offset,
				       struct coffer_oid *oid)
{
	memcpy(oid->id, prefix, CF_PREFIX_SIZE);
	cf_store_le64(oid->id + CF_PREFIX_SIZE, offset);
}

#endif /* COFFER_FIO_OID_H */
