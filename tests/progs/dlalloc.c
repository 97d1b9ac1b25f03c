/* libdlalloc.so: a library that the dlopen test loads at run time; its
 * allocations are made from inside the library. */
#include <stdlib.h>
#include <string.h>

void *dl_alloc(size_t n)
{
	return malloc(n);
}

char *dl_dup(const char *s)
{
	return strdup(s);
}

void *dl_calloc(size_t a, size_t b)
{
	return calloc(a, b);
}

void dl_free(void *p)
{
	free(p);
}
