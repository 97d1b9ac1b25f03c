/* bpf/mt_sample.h's draw compiled for the host (tracer/sample_test.go):
 * for "N RATE" on stdin it prints, over N draws from uniform 32-bit
 * inputs (splitmix64), the draws' mean, the largest difference from the
 * exact rate * -ln(u), and the share of draws under RATE/4, RATE and
 * 4*RATE. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
typedef uint32_t __u32;
typedef uint64_t __u64;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define MT_SAMPLE_HOST
#include "mt_sample.h"

static uint64_t state = 42;
static uint64_t splitmix(void)
{
	uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int main(void)
{
	unsigned long long n, rate;
	if (scanf("%llu %llu", &n, &rate) != 2)
		return 2;
	double sum = 0, maxerr = 0;
	unsigned long long under[3] = {0, 0, 0};
	for (unsigned long long i = 0; i < n; i++) {
		__u32 r = (__u32)(splitmix() >> 32);
		__u64 d = mt_sample_draw(r, rate);
		double exact = -log(((double)r + 1) / 4294967296.0) * (double)rate;
		double err = fabs((double)d - exact);
		if (err > maxerr)
			maxerr = err;
		sum += (double)d;
		under[0] += d < rate / 4;
		under[1] += d < rate;
		under[2] += d < rate * 4;
	}
	printf("%.6f %.6f %.6f %.6f %.6f\n", sum / (double)n, maxerr, (double)under[0] / (double)n,
	       (double)under[1] / (double)n, (double)under[2] / (double)n);
	return 0;
}
