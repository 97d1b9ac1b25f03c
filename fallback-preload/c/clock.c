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

#if defined(__x86_64__)
// vclock_addr returns the start of the process's [vvar_vclock] mapping
// (Linux 6.13 and later: its first page is the pvclock page the vDSO
// reads), 0 where there is none.
static uintptr_t vclock_addr(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	// Line by line through a window: a line longer than it (a long
	// path) is skipped, never the tag's own short line.
	char buf[4096];
	size_t len = 0;
	uintptr_t a = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = 0;
			if (strstr(line, "[vvar_vclock]")) {
				a = (uintptr_t)strtoull(line, NULL, 16);
				goto out;
			}
			line = nl + 1;
		}
		len = (size_t)(buf + len - line);
		if (len == sizeof buf - 1)
			len = 0; // one line longer than the window
		else
			memmove(buf, line, len);
	}
out:
	close(fd);
	return a;
}

// pvclock_stable says whether the kernel's kvm-clock is one the vDSO reads
// without a system call, which it does only when the hypervisor marks the
// guest's TSC stable across vCPUs (PVCLOCK_TSC_STABLE_BIT): then the TSC
// orders events across CPUs as well as CLOCK_MONOTONIC does, which is
// computed from it, at a third of its cost. The pvclock page is read
// through a pipe: where the vDSO does not use it, the kernel refuses the
// read (EFAULT) instead of the SIGBUS a load from it would raise.
static int pvclock_stable(void)
{
	uintptr_t a = vclock_addr();
	int p[2];
	if (!a || pipe2(p, O_CLOEXEC) != 0)
		return 0;
	unsigned char ti[32] = {0};
	int ok = write(p[1], (const void *)a, sizeof ti) == (ssize_t)sizeof ti &&
		 read(p[0], ti, sizeof ti) == (ssize_t)sizeof ti;
	close(p[0]);
	close(p[1]);
	// struct pvclock_vcpu_time_info: flags is the byte at 29.
	return ok && (ti[29] & 1);
}
#endif

static int counter_usable(void)
{
#if defined(__x86_64__)
	// The TSC is trusted only where the kernel itself uses it: as its
	// clocksource, or under kvm-clock when the hypervisor vouches for it.
	char b[32] = {0};
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n >= 3 && memcmp(b, "tsc", 3) == 0)
		return 1;
	return n >= 9 && memcmp(b, "kvm-clock", 9) == 0 && pvclock_stable();
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
	// A board's counter counts from power-on; qemu-user's (and some
	// emulators') is the host's wall clock, which NTP steps back and
	// forth: events would go back in time. A counter within a day of
	// CLOCK_REALTIME is taken for that one and clock_gettime used instead.
	struct timespec rt;
	uint64_t c = read_counter();
	if (clock_gettime(CLOCK_REALTIME, &rt) == 0) {
		int64_t d = (int64_t)(c / frq) - (int64_t)rt.tv_sec;
		if (d > -86400 && d < 86400)
			return;
	}
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
