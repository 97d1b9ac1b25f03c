/* bench_loop N SIZE: N malloc+free pairs, the loop the preload benchmark
 * times. It prints the loop's own ns per pair (CLOCK_MONOTONIC), so that
 * process start-up and the tracer's set-up and final flush are reported
 * apart from the per-pair cost. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	size_t sz = argc > 2 ? (size_t)atol(argv[2]) : 64;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		sink = malloc(sz);
		free(sink);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", ns / (double)n);
	return 0;
}
