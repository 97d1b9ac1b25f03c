/* bench_loop N SIZE: N malloc+free pairs, the loop the preload benchmark
 * times. It prints the loop's own ns per pair (CLOCK_MONOTONIC), so that
 * process start-up and the tracer's set-up and final flush are reported
 * apart from the per-pair cost. A second line, "cpu N", is the loop's
 * thread CPU time per pair: on a loaded machine the wall time counts the
 * time others ran too, this one only the thread's own work (a tracer's
 * work in another thread or process is not in it). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	size_t sz = argc > 2 ? (size_t)atol(argv[2]) : 64;
	struct timespec a, b, ca, cb;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		sink = malloc(sz);
		free(sink);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	double cpu = (double)(cb.tv_sec - ca.tv_sec) * 1e9 + (double)(cb.tv_nsec - ca.tv_nsec);
	printf("%.1f\ncpu %.1f\n", ns / (double)n, cpu / (double)n);
	return 0;
}
