/* early_lib: a library whose constructor allocates before the preload
 * library's constructor has run (the program links it, so it is
 * initialised first, as libstdc++ is). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *early_kept;

__attribute__((constructor)) static void early_init(void)
{
	early_kept = malloc(12345);
	void *p = malloc(999);
	p = realloc(p, 1999);
	free(p);
	char *s = strdup("early");
	free(s);
	void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(m, 8192);
}
