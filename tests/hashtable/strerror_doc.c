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
 * A name that is not in the table below fails the test (add it: a new code in a header
 * needs words here and in runtime/errors.c), except for the few words that only look like
 * one ("per-EQ").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/common.h>

#define ERRNO_ENTRY(e)                                                                             \
	{                                                                                          \
#e, e                                                                              \
	}

static const struct {
	const char *name;
	int value;
} known[] = {
    ERRNO_ENTRY(EPERM),	       ERRNO_ENTRY(ENOENT),	     ERRNO_ENTRY(EINTR),
    ERRNO_ENTRY(EIO),	       ERRNO_ENTRY(E2BIG),	     ERRNO_ENTRY(EBADF),
    ERRNO_ENTRY(EAGAIN),       ERRNO_ENTRY(ENOMEM),	     ERRNO_ENTRY(EACCES),
    ERRNO_ENTRY(EFAULT),       ERRNO_ENTRY(EBUSY),	     ERRNO_ENTRY(EEXIST),
    ERRNO_ENTRY(ENODEV),       ERRNO_ENTRY(ENOTDIR),	     ERRNO_ENTRY(EINVAL),
    ERRNO_ENTRY(ENFILE),       ERRNO_ENTRY(EMFILE),	     ERRNO_ENTRY(ENOSPC),
    ERRNO_ENTRY(EPIPE),	       ERRNO_ENTRY(ERANGE),	     ERRNO_ENTRY(ENAMETOOLONG),
    ERRNO_ENTRY(ELOOP),	       ERRNO_ENTRY(ENOBUFS),	     ERRNO_ENTRY(EPROTO),
    ERRNO_ENTRY(EBADMSG),      ERRNO_ENTRY(EOVERFLOW),	     ERRNO_ENTRY(EMSGSIZE),
    ERRNO_ENTRY(EPROTOTYPE),   ERRNO_ENTRY(EPROTONOSUPPORT), ERRNO_ENTRY(ENOTSOCK),
    ERRNO_ENTRY(ECONNRESET),   ERRNO_ENTRY(ENOTCONN),	     ERRNO_ENTRY(ETIMEDOUT),
    ERRNO_ENTRY(ECONNREFUSED), ERRNO_ENTRY(EALREADY),	     ERRNO_ENTRY(ESTALE),
    ERRNO_ENTRY(ECANCELED),    ERRNO_ENTRY(ENOSYS),	     ERRNO_ENTRY(ENOTSUP),
};

/* Words of the headers that look like "-E..." but are no errno. */
static const char *const not_errno[] = {"EQ"};

static int check_name(const char *file, const char *name)
{
	const char *mine, *libc;
	size_t i;

	for (i = 0; i < sizeof(not_errno) / sizeof(not_errno[0]); i++)
		if (strcmp(name, not_errno[i]) == 0)
			return 0;
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(name, known[i].name) == 0)
			break;
	if (i == sizeof(known) / sizeof(known[0])) {
		fprintf(stderr,
			"%s: -%s is not in strerror_doc.c's table: add it (and its words "
			"in runtime/errors.c)\n",
			file, name);
		return 1;
	}
	mine = coffer_strerror(-known[i].value);
	libc = strerrordesc_np(known[i].value);
	if (strcmp(mine, coffer_strerror(known[i].value)) != 0) {
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
