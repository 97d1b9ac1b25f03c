/* threadchurn: THREADS threads one after another, each allocating and
 * leaving a block to its own key's destructor, which frees it after the
 * preload library's destructor has run (the library's key is older). At
 * the end it prints the size of its address space before and after: a
 * library that kept something mapped per ended thread would show there. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 3000 };

static pthread_key_t key;

static void late_free(void *p)
{
	free(p);
}

static void *worker(void *arg)
{
	void *p = malloc(48);
	if (!p)
		abort();
	memset(p, 1, 48);
	pthread_setspecific(key, p);
	free(malloc(16));
	return arg;
}

/* vm_kb: the process's address space (VmSize), in KiB: what a mapping
 * kept per ended thread would grow, even where the kernel merges them. */
static long vm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "VmSize:", 7) == 0)
			kb = strtol(line + 7, NULL, 10);
	fclose(f);
	return kb;
}

int main(void)
{
	if (pthread_key_create(&key, late_free) != 0)
		return 1;
	long before = vm_kb();
	for (int i = 0; i < THREADS; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
			return 1;
	}
	printf("vmsize %ld %ld\n", before, vm_kb());
	return 0;
}
