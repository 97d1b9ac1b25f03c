/* mmapcalls: mmap, munmap and mremap called from the program's own
 * functions (not from main, not as tail calls) in main and in threads, with
 * malloc's own mmap and munmap of large blocks in between: those are the C
 * library's and must not be logged. Built -O2 as a static program too
 * (mmapcalls-static-o2), where main sits in .text.startup, before the C
 * start-up files' functions, and the program's other functions after them. */
#include "truth.h"
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define ROUNDS 100
#define THREADS 3

__attribute__((noinline)) static char *map(size_t len)
{
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		truth_die("mmap failed\n");
	truth_rec("mmap", len, m);
	m[0] = 1;
	return m;
}

__attribute__((noinline)) static void unmap(char *m, size_t len)
{
	if (munmap(m, len) != 0)
		truth_die("munmap failed\n");
	truth_rec("munmap", len, m);
}

__attribute__((noinline)) static char *remap(char *a, size_t l1, size_t l2)
{
	char *b = mremap(a, l1, l2, MREMAP_MAYMOVE);
	if (b == MAP_FAILED)
		truth_die("mremap failed\n");
	truth_rec("munmap", l1, a);
	truth_rec("mremap", l2, b);
	return b;
}

/* Above the mmap threshold: malloc maps the block itself, free unmaps it. */
__attribute__((noinline)) static void big(size_t n)
{
	void *p = escape(malloc(n));
	truth_rec("malloc", n, p);
	free(p);
	truth_rec("free", n, p);
}

static void work(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < ROUNDS; i++) {
		size_t len = (size_t)(1 + i % 4) * (size_t)pg;
		char *m = map(len);
		if (i % 8 == 0) {
			m = remap(m, len, 2 * len);
			len *= 2;
		}
		big(256 * 1024 + (size_t)i);
		unmap(m, len);
	}
}

static void *thread(void *arg)
{
	work();
	truth_exit();
	return arg;
}

int main(void)
{
	truth_init();
#ifdef __GLIBC__
	/* A fixed threshold: glibc's own would rise past the blocks above
	 * after the first free, and malloc would stop mapping them. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		truth_gap(); /* pthread_create allocates the thread's TLS */
		if (pthread_create(&t[i], NULL, thread, NULL) != 0)
			truth_die("pthread_create failed\n");
	}
	work();
	for (int i = 0; i < THREADS; i++) {
		truth_gap();
		if (pthread_join(t[i], NULL) != 0)
			truth_die("pthread_join failed\n");
	}
	truth_write();
	return 0;
}
