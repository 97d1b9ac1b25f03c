// allocs: docs/spec.md §3's C functions under whichever allocator the program is
// linked with or given by LD_PRELOAD (glibc, jemalloc, tcmalloc,
// mimalloc), with large blocks that make the allocator map memory of its
// own (which must not be logged), and, built with -DUSE_JEMALLOC,
// -DUSE_TCMALLOC or -DUSE_MIMALLOC and linked against it, that
// allocator's own API (issue 17). ROUNDS (default 8) repeats it all.
#include "truth.h"
#include <malloc.h>
#include <sys/mman.h>

#if defined(USE_JEMALLOC)
// No dev package is needed: the prototypes of jemalloc 5's API.
void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);
size_t xallocx(void *ptr, size_t size, size_t extra, int flags);
void sdallocx(void *ptr, size_t size, int flags);
void dallocx(void *ptr, int flags);
#define MALLOCX_ALIGN(a) ((int)(__builtin_ffsl((long)(a)) - 1))
#elif defined(USE_TCMALLOC)
void *tc_malloc(size_t size);
void *tc_malloc_skip_new_handler(size_t size);
void tc_free(void *ptr);
void tc_free_sized(void *ptr, size_t size);
void tc_cfree(void *ptr);
void *tc_calloc(size_t n, size_t size);
void *tc_realloc(void *ptr, size_t size);
void *tc_memalign(size_t align, size_t size);
int tc_posix_memalign(void **ptr, size_t align, size_t size);
void *tc_valloc(size_t size);
void *tc_pvalloc(size_t size);
#elif defined(USE_MIMALLOC)
void *mi_malloc(size_t size);
void *mi_calloc(size_t n, size_t size);
void *mi_realloc(void *p, size_t size);
void mi_free(void *p);
char *mi_strdup(const char *s);
void *mi_zalloc(size_t size);
void *mi_malloc_aligned(size_t size, size_t align);
void *mi_zalloc_aligned(size_t size, size_t align);
void *mi_calloc_aligned(size_t n, size_t size, size_t align);
void *mi_realloc_aligned(void *p, size_t size, size_t align);
#endif

static void api(int r)
{
#if defined(USE_JEMALLOC)
	void *p = escape(mallocx(300 + r, 0));
	truth_rec("mallocx", 300 + r, p);
	void *q = escape(rallocx(p, 600, 0));
	truth_rec("free", 300 + r, p);
	truth_rec("rallocx", 600, q);
	size_t cur = 600;
	// Grows in place when the next size class is free: either way the
	// record says what the call did.
	if (xallocx(q, 640, 0, 0) >= 640) {
		truth_rec("free", 600, q);
		truth_rec("xallocx", 640, q);
		cur = 640;
	}
	sdallocx(q, cur, 0);
	truth_rec("sdallocx", cur, q);
	p = escape(mallocx(64, MALLOCX_ALIGN(64)));
	truth_rec("mallocx", 64, p);
	dallocx(p, 0);
	truth_rec("dallocx", 64, p);
#elif defined(USE_TCMALLOC)
	void *p = escape(tc_malloc(100 + r));
	truth_rec("tc_malloc", 100 + r, p);
	void *c = escape(tc_calloc(2, 50));
	truth_rec("tc_calloc", 100, c);
	void *q = escape(tc_realloc(c, 300));
	truth_rec("free", 100, c);
	truth_rec("tc_realloc", 300, q);
	void *m = escape(tc_memalign(64, 128));
	truth_rec("tc_memalign", 128, m);
	void *pm = 0;
	if (tc_posix_memalign(&pm, 64, 256) != 0)
		truth_die("tc_posix_memalign failed\n");
	truth_rec("tc_posix_memalign", 256, escape(pm));
	void *v = escape(tc_valloc(500));
	truth_rec("tc_valloc", 500, v);
	void *pv = escape(tc_pvalloc(100));
	truth_rec("tc_pvalloc", 100, pv);
	void *s = escape(tc_malloc_skip_new_handler(77));
	truth_rec("tc_malloc", 77, s);
	tc_free(p);
	truth_rec("tc_free", 100 + r, p);
	tc_cfree(q);
	truth_rec("tc_cfree", 300, q);
	tc_free_sized(m, 128);
	truth_rec("tc_free", 128, m);
	tc_free(pm);
	truth_rec("tc_free", 256, pm);
	tc_free(v);
	truth_rec("tc_free", 500, v);
	tc_free(pv);
	truth_rec("tc_free", 100, pv);
	tc_free(s);
	truth_rec("tc_free", 77, s);
#elif defined(USE_MIMALLOC)
	void *p = escape(mi_malloc(100 + r));
	truth_rec("mi_malloc", 100 + r, p);
	void *c = escape(mi_calloc(4, 25));
	truth_rec("mi_calloc", 100, c);
	void *q = escape(mi_realloc(c, 400));
	truth_rec("free", 100, c);
	truth_rec("mi_realloc", 400, q);
	char *s = (char *)escape(mi_strdup("mimalloc's own strdup"));
	truth_rec("mi_strdup", 22, s);
	void *z = escape(mi_zalloc(64));
	truth_rec("mi_zalloc", 64, z);
	void *a = escape(mi_malloc_aligned(200, 64));
	truth_rec("mi_malloc_aligned", 200, a);
	void *za = escape(mi_zalloc_aligned(300, 128));
	truth_rec("mi_zalloc_aligned", 300, za);
	void *ca = escape(mi_calloc_aligned(3, 10, 32));
	truth_rec("mi_calloc_aligned", 30, ca);
	void *ra = escape(mi_realloc_aligned(a, 500, 64));
	truth_rec("free", 200, a);
	truth_rec("mi_realloc_aligned", 500, ra);
	mi_free(p);
	truth_rec("mi_free", 100 + r, p);
	mi_free(q);
	truth_rec("mi_free", 400, q);
	mi_free(s);
	truth_rec("mi_free", 22, s);
	mi_free(z);
	truth_rec("mi_free", 64, z);
	mi_free(za);
	truth_rec("mi_free", 300, za);
	mi_free(ca);
	truth_rec("mi_free", 30, ca);
	mi_free(ra);
	truth_rec("mi_free", 500, ra);
#else
	(void)r;
#endif
}

int main(void)
{
	const char *rs = getenv("ROUNDS");
	int rounds = rs ? atoi(rs) : 8;
	truth_init();
	truth_setname("allocs-main");
	for (int r = 0; r < rounds; r++) {
		void *p = escape(malloc(100 + r));
		truth_rec("malloc", 100 + r, p);
		void *c = escape(calloc(3, 40));
		truth_rec("calloc", 120, c);
		void *q = escape(realloc(c, 500));
		truth_rec("free", 120, c);
		truth_rec("realloc", 500, q);
		void *n = escape(realloc(NULL, 50));
		truth_rec("realloc", 50, n);
		char *s = (char *)escape(strdup("hello, allocators"));
		truth_rec("strdup", 18, s);
		char *sn = (char *)escape(strndup("abcdefgh", 4));
		truth_rec("strndup", 5, sn);
		void *pm = 0;
		if (posix_memalign(&pm, 64, 200) != 0)
			truth_die("posix_memalign failed\n");
		truth_rec("posix_memalign", 200, escape(pm));
		void *aa = escape(aligned_alloc(256, 512));
		truth_rec("aligned_alloc", 512, aa);
		void *ma = escape(memalign(128, 300));
		truth_rec("memalign", 300, ma);
		void *v = escape(valloc(1000));
		truth_rec("valloc", 1000, v);
		// Large blocks: every allocator maps these itself (glibc's
		// mmap threshold, jemalloc's extents, tcmalloc's spans,
		// mimalloc's segments); only the malloc is the program's.
		size_t bigsz = ((size_t)8 << 20) + (size_t)r * 4096;
		void *big = escape(malloc(bigsz));
		truth_rec("malloc", bigsz, big);
		void *big2 = escape(calloc(1, (size_t)3 << 20));
		truth_rec("calloc", (size_t)3 << 20, big2);
		void *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			truth_die("mmap failed\n");
		truth_rec("mmap", 65536, m);
		free(NULL);
		api(r);
		munmap(m, 65536);
		truth_rec("munmap", 65536, m);
		free(big2);
		truth_rec("free", (size_t)3 << 20, big2);
		free(big);
		truth_rec("free", bigsz, big);
		free(v);
		truth_rec("free", 1000, v);
		free(ma);
		truth_rec("free", 300, ma);
		free(aa);
		truth_rec("free", 512, aa);
		free(pm);
		truth_rec("free", 200, pm);
		free(sn);
		truth_rec("free", 5, sn);
		free(s);
		truth_rec("free", 18, s);
		free(n);
		truth_rec("free", 50, n);
		free(q);
		truth_rec("free", 500, q);
		free(p);
		truth_rec("free", 100 + r, p);
	}
	truth_write();
	return 0;
}
