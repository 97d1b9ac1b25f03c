/* nsprog: allocations made inside libns.so (nslib.h), for the container
 * tests (tests/container_test.go): in a chroot, and with another libns.so
 * bind-mounted over the one it links.
 *
 * Besides truth.h's record it writes "$MEMTRACE_TRUTH.sites", one line per
 * allocation made in the library: "ptr function module", the function of
 * the library that called malloc and the file the loader mapped for it, as
 * dladdr names it (the path as the process sees it). */
#include "nslib.h"
#include "truth.h"
#include <dlfcn.h>

#define NS_ROUNDS 8

int main(void)
{
	truth_init();
	struct ns_site sites[NS_ROUNDS];
	void *ptrs[NS_ROUNDS];
	for (int i = 0; i < NS_ROUNDS; i++) {
		ptrs[i] = escape(ns_alloc(1000 + (size_t)i, &sites[i]));
		truth_rec("malloc", 1000 + (uint64_t)i, ptrs[i]);
	}
	/* One allocation of the program's own, and the frees. */
	void *own = escape(malloc(777));
	truth_rec("malloc", 777, own);
	for (int i = 0; i < NS_ROUNDS; i++) {
		free(ptrs[i]);
		truth_rec("free", 1000 + (uint64_t)i, ptrs[i]);
	}
	free(own);
	truth_rec("free", 777, own);
	truth_write();

	const char *path = getenv("MEMTRACE_TRUTH");
	if (!path)
		return 0;
	static char fn[4096];
	size_t pl = strlen(path);
	if (pl > sizeof fn - 16)
		truth_die("nsprog: path too long\n");
	memcpy(fn, path, pl);
	memcpy(fn + pl, ".sites", 7);
	int fd = open(fn, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		truth_die("nsprog: cannot open the sites file\n");
	static char line[4096 + 128];
	for (int i = 0; i < NS_ROUNDS; i++) {
		Dl_info di;
		if (!dladdr(sites[i].addr, &di) || !di.dli_fname)
			truth_die("nsprog: dladdr failed\n");
		char *o = put_hex(line, (uintptr_t)ptrs[i]);
		*o++ = ' ';
		size_t n = strlen(sites[i].fn);
		memcpy(o, sites[i].fn, n);
		o += n;
		*o++ = ' ';
		n = strlen(di.dli_fname);
		if (n > 4096)
			truth_die("nsprog: module path too long\n");
		memcpy(o, di.dli_fname, n);
		o += n;
		*o++ = '\n';
		if (write(fd, line, (size_t)(o - line)) != o - line)
			truth_die("nsprog: write failed\n");
	}
	close(fd);
	return 0;
}
