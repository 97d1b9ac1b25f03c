/*
 * nslib.h: the interface of libns.so, the library the container tests
 * (tests/container_test.go) put in a chroot or hide behind a bind mount.
 * Two builds share the soname: nslib_host.c (installed as libns.so) and
 * nslib_alt.c (libns-alt.so, bind-mounted over libns.so in a mount
 * namespace). The alternative's allocating function lies at offsets where
 * the host build has other functions, so a frame named from the host file
 * gets a wrong name.
 */
#ifndef NSLIB_H
#define NSLIB_H

#include <stddef.h>

/* ns_site says which function of the library called malloc: its name and
 * address (for dladdr, which names the file the loader mapped). */
struct ns_site {
	const char *fn;
	void *addr;
};

void *ns_alloc(size_t n, struct ns_site *site);

#endif
