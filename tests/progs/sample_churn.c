/*
 * sample_churn: a heap of known shape under churn, for --sample's accuracy
 * test (tests/sample_test.go) and its benchmark (scripts/bench-sample.sh).
 * Three sites, each its own function so that a profile's stacks tell them
 * apart, hold blocks of their own size range (16 B to 8 KiB, about 105 MB
 * live in all: some 5, 5 and 95 MB, so that sampling's spread of a site's
 * share, sqrt(rate/total * share * (1 - share)), stays under a point at a
 * rate of 64K); then STEPS times a random block is freed and another of
 * its site allocated in its place (one time in four by realloc). At the end the blocks stay live and the
 * program prints its truth, the live bytes per site:
 *   site_small BYTES BLOCKS
 *   site_medium BYTES BLOCKS
 *   site_large BYTES BLOCKS
 * and on stderr how long its allocations and frees took (the benchmark's
 * figure, without the start-up of a tracer): "sample_churn: NS ns EVENTS
 * events".
 * Usage: sample_churn [SEED [STEPS]] (defaults 1 and 215000: ~430k events
 * of churn after the ~61k allocations of the start).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NSITES 3

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct site {
	const char *name;
	size_t lo, hi; /* block sizes, inclusive */
	size_t nblocks;
	void **blocks;
	size_t *sizes;
	uint64_t live;
};

static void escape(void *p)
{
	__asm__ volatile("" : : "g"(p) : "memory");
}

/* One allocation function per site: the frame the profile names. */
__attribute__((noinline)) static void *site_small(void *old, size_t n)
{
	void *p = old ? realloc(old, n) : malloc(n);
	escape(p);
	return p;
}
__attribute__((noinline)) static void *site_medium(void *old, size_t n)
{
	void *p = old ? realloc(old, n) : malloc(n);
	escape(p);
	return p;
}
__attribute__((noinline)) static void *site_large(void *old, size_t n)
{
	void *p = old ? realloc(old, n) : malloc(n);
	escape(p);
	return p;
}

static void *(*const alloc_at[NSITES])(void *, size_t) = {site_small, site_medium, site_large};

static struct site sites[NSITES] = {
	{"site_small", 16, 256, 38000, 0, 0, 0},
	{"site_medium", 257, 2048, 4500, 0, 0, 0},
	{"site_large", 2049, 8192, 18500, 0, 0, 0},
};

static size_t size_in(struct site *s)
{
	return s->lo + next() % (s->hi - s->lo + 1);
}

int main(int argc, char **argv)
{
	rng = argc > 1 ? strtoull(argv[1], 0, 10) * 0x9E3779B97F4A7C15ULL + 1 : 0x9E3779B97F4A7C16ULL;
	long steps = argc > 2 ? atol(argv[2]) : 215000;
	size_t total = 0;
	for (int i = 0; i < NSITES; i++) {
		struct site *s = &sites[i];
		/* calloc: the bookkeeping is not traced as a site's. */
		s->blocks = calloc(s->nblocks, sizeof(void *));
		s->sizes = calloc(s->nblocks, sizeof(size_t));
		total += s->nblocks;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NSITES; i++) {
		struct site *s = &sites[i];
		for (size_t k = 0; k < s->nblocks; k++) {
			s->sizes[k] = size_in(s);
			s->blocks[k] = alloc_at[i](0, s->sizes[k]);
			s->live += s->sizes[k];
		}
	}
	for (long n = 0; n < steps; n++) {
		uint64_t pick = next() % total;
		int i = 0;
		while (pick >= sites[i].nblocks) {
			pick -= sites[i].nblocks;
			i++;
		}
		struct site *s = &sites[i];
		s->live -= s->sizes[pick];
		s->sizes[pick] = size_in(s);
		/* One step in four a realloc (a free and an allocation to the
		 * tracer), the others a free and a malloc. */
		if (n % 4 == 0) {
			s->blocks[pick] = alloc_at[i](s->blocks[pick], s->sizes[pick]);
		} else {
			free(s->blocks[pick]);
			s->blocks[pick] = alloc_at[i](0, s->sizes[pick]);
		}
		s->live += s->sizes[pick];
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
	fprintf(stderr, "sample_churn: %lld ns %lld events\n", ns, (long long)total + 2LL * steps);
	for (int i = 0; i < NSITES; i++)
		printf("%s %llu %zu\n", sites[i].name, (unsigned long long)sites[i].live, sites[i].nblocks);
	return 0;
}
