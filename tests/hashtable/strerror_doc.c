/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * strerror_doc - every negative errno a public header documents has words of coffer's own.
 *
 * Usage: strerror_doc HEADER...
 *
 * The style (the public headers in include/coffer/) lists every error code each public function can
 * return, and users write their error handling and messages from those lists; the message
 * comes from coffer_strerror(). For every "-EXXX" in the given headers this checks that
 * coffer_strerror() names the code with text of its own, not the C library's generic
 * description ("No space left on device" for a store that cannot watch another client) nor
 * "unknown error", and that the negative and the positive code give the same text.
 *
 * A name the C library does not know as an errno (strerrorname_np()) fails the test, except
 * for the few words that only look like one ("per-EQ"); a new code in a header needs its
 * words in runtime/errors.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/common.h>

/* The errno called @name ("ENOENT"), found through glibc's own names (strerrorname_np(),
 * beside strerrordesc_np() below), or 0 when it names none. */
static int errno_by_name(const char *name)
{
	for (int e = 1; e < 4096; e++) {
		const char *n = strerrorname_np(e);

		if (n != NULL && strcmp(n, name) == 0)
			return e;
	}
	return 0;
}

/* Words of the headers that look like "-E..." but are no errno. */
static const char *const not_errno[] = {"EQ"};

static int check_name(const char *file, const char *name)
{
	const char *mine, *libc;
	size_t i;
	int e;

	for (i = 0; i < sizeof(not_errno) / sizeof(not_errno[0]); i++)
		if (strcmp(name, not_errno[i]) == 0)
			return 0;
	e = errno_by_name(name);
	if (e == 0) {
		fprintf(stderr, "%s: -%s is no errno this C library knows\n", file, name);
		return 1;
	}
	mine = coffer_strerror(-e);
	libc = strerrordesc_np(e);
	if (strcmp(mine, coffer_strerror(e)) != 0) {
		fprintf(stderr, "%s: -%s and %s have different texts\n", file, name, name);
		return 1;
	}
	if (strcmp(mine, "unknown error") == 0 || (libc != NULL && strcmp(mine, libc) == 0)) {
		fprintf(stderr,
			"%s: -%s is documented, but coffer_strerror() has no words of its own for "
			"it (\"%s\"): say in runtime/errors.c what it means here and what to do\n",
			file, name, mine);
		return 1;
	}
	printf("-%-16s %s\n", name, mine);
	return 0;
}

/* Checks every distinct "-EXXX" of @file. Return: the number of failures, or 1 if it
 * cannot be read. */
static int check_file(const char *file)
{
	char seen[64][24];
	unsigned int nseen = 0, names = 0;
	int bad = 0, c, prev = 0;
	FILE *f = fopen(file, "r");

	if (f == NULL) {
		perror(file);
		return 1;
	}
	while ((c = fgetc(f)) != EOF) {
		char name[24];
		size_t n = 0;
		unsigned int k;

		if (!(prev == '-' && c == 'E')) {
			prev = c;
			continue;
		}
		while ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			if (n + 1 < sizeof(name))
				name[n++] = (char)c;
			c = fgetc(f);
		}
		name[n] = '\0';
		prev = c;
		/* "-EXXX" must end the word: "-Errors" or "-E_FOO" is not a code */
		if (n < 2 || (c >= 'a' && c <= 'z') || c == '_')
			continue;
		for (k = 0; k < nseen; k++)
			if (strcmp(seen[k], name) == 0)
				break;
		if (k < nseen)
			continue;
		if (nseen < sizeof(seen) / sizeof(seen[0]))
			memcpy(seen[nseen++], name, n + 1);
		names++;
		bad += check_name(file, name);
	}
	fclose(f);
	if (names == 0) { /* a header without any: the scan, not the header, is broken */
		fprintf(stderr, "%s: no -EXXX found\n", file);
		bad++;
	}
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s HEADER...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		bad += check_file(argv[i]);
	if (bad)
		fprintf(stderr, "%d documented code(s) without coffer_strerror() words\n", bad);
	return bad ? 1 : 0;
}
