/* libns.so as installed on the host: see nslib.h. */
#include "nslib.h"
#include <stdlib.h>

void *volatile ns_sink;

/* Code where the alternative build has its allocating function. */
__attribute__((noinline)) void host_pad_a(void)
{
	for (int i = 0; i < 64; i++)
		ns_sink = (void *)(size_t)i;
}

__attribute__((noinline)) void host_pad_b(void)
{
	for (int i = 0; i < 64; i++)
		ns_sink = (void *)(size_t)(i * 3);
}

__attribute__((noinline)) void *host_inner(size_t n, struct ns_site *site)
{
	void *p = malloc(n);
	site->fn = __func__;
	site->addr = (void *)host_inner;
	ns_sink = p;
	return p;
}

void *ns_alloc(size_t n, struct ns_site *site)
{
	void *p = host_inner(n, site);
	ns_sink = p;
	return p;
}
