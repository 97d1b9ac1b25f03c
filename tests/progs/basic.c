/* basic: the single-threaded C rows of docs/spec.md §3 and memtrack's T01, T02,
 * T05-T14, T19, T23 scenarios. */
#include "truth.h"
#include <errno.h>
#include <malloc.h>
#include <stdint.h>

/* A size no allocator can satisfy, on 32 and 64 bits. */
#define HUGE_SIZE (SIZE_MAX - 4096) /* glibc refuses anything above PTRDIFF_MAX */

int main(void)
{
	truth_init();
	truth_setname("basic-main");

	/* T01 malloc / free */
	char *p = escape(malloc(100));
	truth_rec("malloc", 100, p);
	p[0] = 1;
	free(p);
	truth_rec("free", 100, p);

	/* T02 calloc / free, zeroed */
	unsigned char *c = escape(calloc(10, 12));
	truth_rec("calloc", 120, c);
	for (int i = 0; i < 120; i++)
		if (c[i])
			truth_die("calloc did not zero\n");
	free(c);
	truth_rec("free", 120, c);

	/* T05 realloc(NULL, n) */
	char *r = escape(realloc(NULL, 64));
	truth_rec("realloc", 64, r);
	/* T06 grow: free of the old block, then the new one, even in place */
	char *r2 = escape(realloc(r, 4096));
	truth_rec("free", 64, r);
	truth_rec("realloc", 4096, r2);
	/* T07 shrink (likely in place) */
	char *r3 = escape(realloc(r2, 32));
	truth_rec("free", 4096, r2);
	truth_rec("realloc", 32, r3);
	/* T08 realloc(p, 0) frees p; musl's returns a new block as well */
	void *z = escape(realloc(r3, 0));
	truth_rec("free", 32, r3);
#ifdef __GLIBC__
	if (z)
		truth_die("realloc(p, 0) returned a block\n");
#else
	if (z) {
		truth_rec("realloc", 0, z);
		free(z);
		truth_rec("free", 0, z);
	}
#endif

	/* T09 five-step realloc chain */
	size_t sizes[5] = {16, 48, 200, 1000, 24};
	char *ch = NULL;
	size_t prev = 0;
	for (int i = 0; i < 5; i++) {
		char *n = escape(realloc(ch, sizes[i]));
		if (ch)
			truth_rec("free", prev, ch);
		truth_rec("realloc", sizes[i], n);
		ch = n;
		prev = sizes[i];
	}
	free(ch);
	truth_rec("free", prev, ch);

	/* T10 free(NULL): nothing */
	free(escape(NULL));

	/* T11 malloc(0): glibc returns a unique block */
	void *m0 = escape(malloc(0));
	if (m0) {
		truth_rec("malloc", 0, m0);
		free(m0);
		truth_rec("free", 0, m0);
	}

	/* T12 10 MB (mmap inside malloc is not logged again) */
	char *big = escape(malloc(10 << 20));
	truth_rec("malloc", 10 << 20, big);
	big[0] = big[(10 << 20) - 1] = 1;
	free(big);
	truth_rec("free", 10 << 20, big);

	/* T13 200 x malloc(13), all freed */
	static void *many[200];
	for (int i = 0; i < 200; i++) {
		many[i] = escape(malloc(13));
		truth_rec("malloc", 13, many[i]);
	}
	for (int i = 0; i < 200; i++) {
		free(many[i]);
		truth_rec("free", 13, many[i]);
	}

	/* T14 intentional leak */
	void *leak = escape(malloc(777));
	truth_rec("malloc", 777, leak);

	/* T19 failed realloc: nothing logged, the block stays live */
	char *keep = escape(malloc(50));
	truth_rec("malloc", 50, keep);
	errno = 0;
	void *fr = escape(realloc(keep, HUGE_SIZE));
	if (fr)
		truth_die("huge realloc succeeded\n");
	keep[49] = 1;
	free(keep);
	truth_rec("free", 50, keep);

	/* failed malloc, calloc (overflow), aligned_alloc: nothing */
	if (escape(malloc(HUGE_SIZE)))
		truth_die("huge malloc succeeded\n");
	if (escape(calloc(SIZE_MAX / 2, 4)))
		truth_die("overflowing calloc succeeded\n");

	/* T23 strdup / strndup: one event each, size incl. the NUL */
	char *s = escape(strdup("hello, memtrace"));
	truth_rec("strdup", 16, s);
	char *sn = escape(strndup("abcdefghij", 4));
	truth_rec("strndup", 5, sn);
	char *sn2 = escape(strndup("xy", 100));
	truth_rec("strndup", 3, sn2);
	free(s);
	truth_rec("free", 16, s);
	free(sn);
	truth_rec("free", 5, sn);
	free(sn2);
	truth_rec("free", 3, sn2);

	/* reallocarray: alloc op reallocarray, free stays free */
	int *ra = escape(reallocarray(NULL, 10, sizeof(int)));
	truth_rec("reallocarray", 10 * sizeof(int), ra);
	int *ra2 = escape(reallocarray(ra, 100, sizeof(int)));
	truth_rec("free", 10 * sizeof(int), ra);
	truth_rec("reallocarray", 100 * sizeof(int), ra2);
	if (escape(reallocarray(ra2, SIZE_MAX / 2, 4)))
		truth_die("overflowing reallocarray succeeded\n");
	free(ra2);
	truth_rec("free", 100 * sizeof(int), ra2);

	/* the aligned family: size = requested size */
	void *pm = NULL;
	if (posix_memalign(&pm, 64, 300) != 0)
		truth_die("posix_memalign failed\n");
	escape(pm);
	truth_rec("posix_memalign", 300, pm);
	void *pm_fail = NULL;
	if (posix_memalign(&pm_fail, 64, HUGE_SIZE) == 0)
		truth_die("huge posix_memalign succeeded\n");
	/* A static glibc (before 2.38) has one function under both names and
	 * no PLT stub to tell which was called: memtrace logs it as memalign
	 * (docs/tracer.md, "Static programs"), so the static build asks for that. */
#if defined(TRUTH_STATIC) && defined(__GLIBC__)
#if !__GLIBC_PREREQ(2, 38)
#define TRUTH_ONE_MEMALIGN
#endif
#endif
#ifdef TRUTH_ONE_MEMALIGN
	void *aa = escape(memalign(128, 256));
	truth_rec("memalign", 256, aa);
#else
	void *aa = escape(aligned_alloc(128, 256));
	truth_rec("aligned_alloc", 256, aa);
#endif
	void *ma = escape(memalign(32, 40));
	truth_rec("memalign", 40, ma);
	void *va = escape(valloc(5000));
	truth_rec("valloc", 5000, va);
#ifdef __GLIBC__
	void *pv = escape(pvalloc(100));
	truth_rec("pvalloc", 100, pv);
#else
	/* musl has no pvalloc */
	void *pv = escape(valloc(100));
	truth_rec("valloc", 100, pv);
#endif
	free(pm);
	truth_rec("free", 300, pm);
	free(aa);
	truth_rec("free", 256, aa);
	free(ma);
	truth_rec("free", 40, ma);
	free(va);
	truth_rec("free", 5000, va);
	free(pv);
	truth_rec("free", 100, pv);

	truth_write();
	return 0;
}
