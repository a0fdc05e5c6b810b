/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/shm.c - the arena segment (see shm.h).
 *
 * Why so careful at start-up: a shared mapping whose backing cannot be allocated later
 * raises SIGBUS in whichever process touches the page first - the store or a client - long
 * after start. Plasma learned this with hugepages. So every byte is backed before the store
 * says 'ready': hugetlb pages are reserved at mmap (MAP_SHARED reserves for the whole file,
 * failing with ENOMEM when too few are free) and then populated; ordinary shmem is checked
 * against available memory (fallocate on shmem would otherwise drive the machine into the
 * OOM killer rather than fail), fallocated (ENOSPC/ENOMEM reported now) and populated with
 * MADV_POPULATE_WRITE (or by touching each page on kernels before 5.14).
 * memfds are sealed (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL): a client holding the fd cannot
 * truncate the arena under the store. A file in a hugetlbfs directory cannot be sealed; the
 * store says so at start.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "runtime/proto.h"
#include "tools/log.h"
#include "tools/shm.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

static uint64_t read_u64_file(const char *path)
{
	char buf[64];
	uint64_t v = UINT64_MAX;
	FILE *f = fopen(path, "re");

	if (f == NULL)
		return UINT64_MAX;
	if (fgets(buf, sizeof(buf), f) != NULL && buf[0] >= '0' && buf[0] <= '9')
		v = strtoull(buf, NULL, 10);
	fclose(f);
	return v;
}

static uint64_t meminfo_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	uint64_t v = UINT64_MAX;
	FILE *f = fopen("/proc/meminfo", "re");

	if (f == NULL)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Headroom of this process's memory cgroup, or UINT64_MAX. */
static uint64_t cgroup_headroom(void)
{
	char line[512], path[700];
	uint64_t best = UINT64_MAX;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (f == NULL)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p = strrchr(line, ':'), *nl;
		uint64_t lim, cur;

		if (p == NULL)
			continue;
		nl = strchr(p, '\n');
		if (nl != NULL)
			*nl = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", p + 1);
			lim = read_u64_file(path);
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", p + 1);
			cur = read_u64_file(path);
		} else if (strstr(line, ":memory:") != NULL) {
			snprintf(path, sizeof(path),
				 "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", p + 1);
			lim = read_u64_file(path);
			snprintf(path, sizeof(path),
				 "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", p + 1);
			cur = read_u64_file(path);
		} else {
			continue;
		}
		if (lim != UINT64_MAX && cur != UINT64_MAX && lim < (1ull << 60)) {
			uint64_t room = lim > cur ? lim - cur : 0;

			if (room < best)
				best = room;
		}
	}
	fclose(f);
	return best;
}

uint64_t coffer__mem_available(void)
{
	uint64_t kb = meminfo_kb("MemAvailable"), cg = cgroup_headroom();
	uint64_t avail = kb == UINT64_MAX ? UINT64_MAX : kb * 1024;

	return cg < avail ? cg : avail;
}

/* Free, unreserved hugepages of @page bytes, or UINT64_MAX when unknown. */
static uint64_t hugepages_free(uint64_t page)
{
	char path[128];
	uint64_t fr, rs;

	snprintf(path, sizeof(path),
		 "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/free_hugepages", page / 1024);
	fr = read_u64_file(path);
	snprintf(path, sizeof(path),
		 "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/resv_hugepages", page / 1024);
	rs = read_u64_file(path);
	if (fr == UINT64_MAX)
		return UINT64_MAX;
	if (rs == UINT64_MAX)
		rs = 0;
	return fr > rs ? fr - rs : 0;
}

static int populate(struct coffer__shm *s)
{
	uint64_t i;

	if (madvise(s->base, s->size, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* Kernels before 5.14: touch each page (the memory is fresh, zero-filled). */
	for (i = 0; i < s->size; i += s->page)
		((volatile char *)s->base)[i] = 0; /* volatile: force the store, not sync */
	return 0;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Try hugepages in @dir (or a hugetlb memfd when @dir is NULL). 0, or -errno with @err set. */
static int try_huge(struct coffer__shm *s, uint64_t size, const char *dir, char *err, size_t errlen)
{
	uint64_t page = meminfo_kb("Hugepagesize"), want, avail;
	struct statfs sfs;
	int fd, rc;

	if (dir != NULL) {
		if (statfs(dir, &sfs) != 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot use -d %s: %s", dir, strerror(errno));
			return rc;
		}
		if ((unsigned long)sfs.f_type != (unsigned long)HUGETLBFS_MAGIC) {
			snprintf(err, errlen,
				 "-d %s is not a hugetlbfs mount (mount one on an empty directory: "
				 "mkdir -p /mnt/huge && mount -t hugetlbfs none /mnt/huge)",
				 dir);
			return -EINVAL;
		}
		page = (uint64_t)sfs.f_bsize;
	} else {
		if (page == UINT64_MAX || page == 0) {
			snprintf(err, errlen, "this kernel reports no hugepage size");
			return -ENOSYS;
		}
		page *= 1024;
	}
	want = round_up(size, page);
	avail = hugepages_free(page);
	if (avail != UINT64_MAX && want / page > avail) {
		snprintf(err, errlen,
			 "need %" PRIu64 " hugepages of %" PRIu64 " kB, only %" PRIu64
			 " free: raise /proc/sys/vm/nr_hugepages, lower -m, or use --hugepages=off",
			 want / page, page / 1024, avail);
		return -ENOMEM;
	}
	if (dir != NULL) {
		fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0) {
			char tmpl[PATH_MAX];

			snprintf(tmpl, sizeof(tmpl), "%s/coffer-arena.XXXXXX", dir);
			fd = mkostemp(tmpl, O_CLOEXEC);
			if (fd >= 0)
				unlink(tmpl);
		}
	} else {
		fd = memfd_create("coffer-arena", MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);
	}
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create a hugepage file: %s", strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)want) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot size the hugepage file to %" PRIu64 " bytes: %s",
			 want, strerror(errno));
		close(fd);
		return rc;
	}
	/* MAP_SHARED on hugetlb reserves every page of the range now (or fails). */
	s->base = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen,
			 "cannot reserve %" PRIu64 " hugepages (%s): raise "
			 "/proc/sys/vm/nr_hugepages, lower -m, or use --hugepages=off",
			 want / page, strerror(errno));
		close(fd);
		s->base = NULL;
		return rc;
	}
	s->fd = fd;
	s->size = want;
	s->page = page;
	s->hugepages = 1;
	rc = populate(s);
	if (rc != 0) {
		snprintf(err, errlen, "cannot prefault the hugepage arena: %s", strerror(-rc));
		munmap(s->base, want);
		close(fd);
		s->base = NULL;
		s->fd = -1;
		return rc;
	}
	if (dir == NULL && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
		s->sealed = 1;
	return 0;
}

static int try_plain(struct coffer__shm *s, uint64_t size, char *err, size_t errlen)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), want = round_up(size, page);
	uint64_t avail = coffer__mem_available();
	int fd, rc;

	if (avail != UINT64_MAX && want > avail) {
		snprintf(err, errlen,
			 "-m %" PRIu64 " bytes cannot be backed: only %" PRIu64
			 " MiB of memory available; lower -m or free memory",
			 want, avail >> 20);
		return -ENOMEM;
	}
	fd = memfd_create("coffer-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)want) != 0 || fallocate(fd, 0, 0, (off_t)want) != 0) {
		rc = -errno;
		snprintf(err, errlen,
			 "cannot back %" PRIu64 " bytes of shared memory (%s); lower -m", want,
			 strerror(errno));
		close(fd);
		return rc;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
		s->sealed = 1;
	s->base = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map the arena: %s", strerror(errno));
		close(fd);
		s->base = NULL;
		return rc;
	}
	s->fd = fd;
	s->size = want;
	s->page = page;
	s->hugepages = 0;
	rc = populate(s);
	if (rc != 0) {
		snprintf(err, errlen, "cannot prefault the arena: %s; lower -m", strerror(-rc));
		coffer__shm_destroy(s);
		return rc;
	}
	return 0;
}

int coffer__shm_create(struct coffer__shm *s, uint64_t size, const char *hugedir, int mode,
		       char *err, size_t errlen)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (size == 0) {
		snprintf(err, errlen, "arena size must be > 0");
		return -EINVAL;
	}
	while (s->segment == 0)
		if (getrandom(&s->segment, sizeof(s->segment), 0) != sizeof(s->segment))
			s->segment = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	if (mode != COFFER_HP_OFF) {
		rc = try_huge(s, size, hugedir, err, errlen);
		if (rc == 0) {
			if (hugedir != NULL)
				COFFER_LOG(COFFER_LOG_NOTICE,
					   "arena is a file in %s: it cannot be sealed, so run "
					   "with -d only for trusted clients",
					   hugedir);
			return 0;
		}
		if (mode == COFFER_HP_ON || hugedir != NULL)
			return rc;
		COFFER_LOG(COFFER_LOG_NOTICE, "no hugepages (%s); using ordinary shared memory",
			   err);
	}
	return try_plain(s, size, err, errlen);
}

void coffer__shm_destroy(struct coffer__shm *s)
{
	if (s->base != NULL && s->base != MAP_FAILED)
		munmap(s->base, s->size);
	if (s->fd >= 0)
		close(s->fd);
	s->base = NULL;
	s->fd = -1;
}

/*
 * A memfd of @bytes named @name, backed now, sealed against shrinking and growing (clients
 * refuse a file that could shrink under their mapping; the access map's descriptor goes to
 * them writable, so without the seals a client could make the store's own accesses fault),
 * and mapped shared, writable and prefaulted into *@map. @what names it in @err.
 * Return: the fd, or -errno with @err set.
 */
static int sealed_memfd(const char *name, const char *what, uint64_t bytes, void **map, char *err,
			size_t errlen)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: memfd_create: %s", what, strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)bytes) != 0 || fallocate(fd, 0, 0, (off_t)bytes) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot back and seal the %" PRIu64 "-byte %s: %s", bytes,
			 what, strerror(errno));
		close(fd);
		return rc;
	}
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (*map == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map the %s: %s", what, strerror(errno));
		*map = NULL;
		close(fd);
		return rc;
	}
	return fd;
}

int coffer__shm_index_create(struct coffer__shm_index *ix, uint64_t arena_bytes, char *err,
			     size_t errlen)
{
	uint64_t slots = 1024;
	char path[64];
	void *map;
	int fd, rc;

	memset(ix, 0, sizeof(*ix));
	ix->fd_ro = -1;
	ix->fd_access = -1;
	while (slots < arena_bytes / 4096 && slots < COFFER_INDEX_SLOTS_MAX)
		slots <<= 1;
	ix->bytes = slots * sizeof(struct coffer_index_slot);
	fd = sealed_memfd("coffer-index", "object index", ix->bytes, &ix->base, err, errlen);
	if (fd < 0)
		return fd;
	/* Clients get a read-only open file description of the same memory, so none of them
	 * can map it writable and mislead the others. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ix->fd_ro = open(path, O_RDONLY | O_CLOEXEC);
	rc = -errno;
	close(fd);
	if (ix->fd_ro < 0) {
		snprintf(err, errlen,
			 "cannot reopen the object index read-only (%s): is /proc mounted?",
			 strerror(-rc));
		coffer__shm_index_destroy(ix);
		return rc;
	}
	if (getrandom(&ix->seed, sizeof(ix->seed), 0) != sizeof(ix->seed))
		ix->seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
	ix->slots = (uint32_t)slots;
	/* The access map (runtime/proto.h): one bit per slot, rounded up to a page. */
	ix->access_bytes = (coffer__access_bytes(ix->slots) + 4095) / 4096 * 4096;
	fd = sealed_memfd("coffer-access", "access map", ix->access_bytes, &map, err, errlen);
	if (fd < 0) {
		coffer__shm_index_destroy(ix);
		return fd;
	}
	ix->access = map;
	ix->fd_access = fd;
	return 0;
}

void coffer__shm_index_destroy(struct coffer__shm_index *ix)
{
	if (ix->base != NULL)
		munmap(ix->base, ix->bytes);
	if (ix->fd_ro >= 0)
		close(ix->fd_ro);
	if (ix->access != NULL)
		munmap(ix->access, ix->access_bytes);
	if (ix->fd_access >= 0)
		close(ix->fd_access);
	ix->base = NULL;
	ix->fd_ro = -1;
	ix->access = NULL;
	ix->fd_access = -1;
}
