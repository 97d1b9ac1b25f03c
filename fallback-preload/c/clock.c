// clock.c: the calibration of the cheap counter the events are timed with
// (mt.h reads it: now_us, read_counter).
#include "mt.h"

#include <fcntl.h>
#include <stdlib.h>

uint64_t epoch_ns;
int use_counter;
uint64_t cnt0;
uint64_t mono0;
uint64_t cnt_mult;
uint64_t inherited_mult;

static int counter_usable(void)
{
#if defined(__x86_64__)
	// The TSC is trusted only where the kernel itself uses it.
	char b[32] = {0};
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	return n >= 3 && memcmp(b, "tsc", 3) == 0;
#elif defined(__aarch64__)
	return 1;
#else
	return 0;
#endif
}

void clock_init(int calibrate_ms)
{
	if (getenv("MEMTRACE_CLOCK") && strcmp(getenv("MEMTRACE_CLOCK"), "monotonic") == 0)
		return;
	if (!counter_usable())
		return;
#if defined(__aarch64__)
	uint64_t frq;
	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
	if (!frq)
		return;
	mono0 = mono_ns();
	cnt0 = read_counter();
	cnt_mult = (uint64_t)((1000000000.0 * 4294967296.0) / (double)frq);
	use_counter = 1;
	(void)calibrate_ms;
#else
	if (inherited_mult) {
		mono0 = mono_ns();
		cnt0 = read_counter();
		cnt_mult = inherited_mult;
		use_counter = 1;
		return;
	}
	// Calibrate the TSC against CLOCK_MONOTONIC over a short spin.
	uint64_t m1 = mono_ns(), c1 = read_counter();
	uint64_t m2, c2;
	do {
		m2 = mono_ns();
		c2 = read_counter();
	} while (m2 - m1 < (uint64_t)calibrate_ms * 1000000ull);
	if (c2 <= c1)
		return;
	mono0 = m2;
	cnt0 = c2;
	cnt_mult = (uint64_t)(((double)(m2 - m1) * 4294967296.0) / (double)(c2 - c1));
	use_counter = 1;
#endif
}
