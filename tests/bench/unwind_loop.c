/* The malloc+free loop of the stack benchmarks (scripts/bench-unwind.sh):
 * N pairs of malloc(64)+free run DEPTH calls below main, so that each
 * stack has DEPTH + 5 frames (the loop, the calls, main, glibc's start).
 * Built twice, with and without frame pointers. Prints ns per pair,
 * timed inside the program as tests/bench/loop.c does. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NI __attribute__((noinline))

static long n;
static void *volatile sink;

NI static double loop(void)
{
	struct timespec a, b;
	/* Warm up: lazy binding, arena set-up. */
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
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}

/* Frames of different sizes, as real code has. */
NI static double down(int d)
{
	volatile char pad[16 + 32 * (d & 3)];
	pad[0] = 0;
	double r = d > 0 ? down(d - 1) : loop();
	return r + pad[0];
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 1000000;
	int depth = argc > 2 ? atoi(argv[2]) : 0;
	printf("%.1f\n", depth > 0 ? down(depth - 1) : loop());
	return 0;
}
