/* libns-alt.so, another libns.so that a container shows under the host
 * library's path: see nslib.h. The host build has other functions at the
 * offsets of these (the test checks that it has no alt_inner_ns). */
#include "nslib.h"
#include <stdlib.h>

void *volatile ns_sink;

__attribute__((noinline)) void *alt_inner_ns(size_t n, struct ns_site *site)
{
	void *p = malloc(n);
	site->fn = __func__;
	site->addr = (void *)alt_inner_ns;
	ns_sink = p;
	return p;
}

void *ns_alloc(size_t n, struct ns_site *site)
{
	void *p = alt_inner_ns(n, site);
	ns_sink = p;
	return p;
}
