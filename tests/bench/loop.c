/* The malloc+free loop the benchmarks trace: N pairs of malloc(64)+free,
 * timed inside the program with CLOCK_MONOTONIC so that start-up and
 * attach costs stay out of the figure. Prints ns per pair. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	void *volatile sink;
	struct timespec a, b;
	/* Warm up: the first calls pay for lazy binding and arena set-up. */
	for (int i = 0; i < 1000; i++) {
		sink = malloc(64);
		free(sink);
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		sink = malloc(64);
		free(sink);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", ns / n);
	return 0;
}
