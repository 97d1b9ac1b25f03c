/* liveleak: a service-like program for the live endpoint's tests.
 *
 *   liveleak           leak LEAK_N blocks of LEAK_SIZE from leak_here (and
 *                      fewer from keep_small), churn temporaries, record
 *                      it all (truth.h), print "leaked", then wait for a
 *                      byte (or EOF) on stdin and exit
 *   liveleak soak SEC  SEC seconds of ~100k allocations a second over a
 *                      steady live set of SOAK_LIVE blocks from 8 call
 *                      paths (not recorded: too many), then exit; a byte
 *                      on stdin ends it early
 *
 * With $MEMTRACE_TEST_WAIT, truth_init waits for a go byte first (attach). */
#include "truth.h"
#include <poll.h>
#include <stdio.h>
#include <time.h>

#define LEAK_N 50
#define LEAK_SIZE 1000
#define SMALL_N 10
#define SMALL_SIZE 300
#define SOAK_LIVE 10000

static void *kept[LEAK_N + SMALL_N];
static int nkept;

__attribute__((noinline)) void *leak_here(size_t n)
{
	void *p = escape(malloc(n));
	truth_rec("malloc", n, p);
	return p;
}

__attribute__((noinline)) void *keep_small(size_t n)
{
	void *p = escape(malloc(n));
	truth_rec("malloc", n, p);
	return p;
}

__attribute__((noinline)) void churn(size_t n)
{
	void *p = escape(malloc(n));
	truth_rec("malloc", n, p);
	free(p);
	truth_rec("free", n, p);
}

static void wait_stdin(void)
{
	char c;
	ssize_t r = read(0, &c, 1);
	(void)r;
}

static int stdin_ready(void)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

static void *soak_slots[SOAK_LIVE];

#define PATH(k)                                                                  \
	__attribute__((noinline)) void *soak_path##k(size_t n) { return escape(malloc(n)); }
// The expansions end with no semicolon that clang-format could see.
// clang-format off
PATH(0) PATH(1) PATH(2) PATH(3) PATH(4) PATH(5) PATH(6) PATH(7)
static void *(*const soak_paths[8])(size_t) = {soak_path0, soak_path1, soak_path2, soak_path3,
					       soak_path4, soak_path5, soak_path6, soak_path7};
// clang-format on

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int soak(double secs)
{
	unsigned long i = 0, x = 88172645463325252UL;
	double start = now(), next = start;
	while (now() - start < secs && !stdin_ready()) {
		/* 1000 replacements (1000 frees, 1000 mallocs) every 10 ms. */
		for (int k = 0; k < 1000; k++, i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			unsigned s = (unsigned)(i % SOAK_LIVE);
			free(soak_slots[s]);
			soak_slots[s] = soak_paths[x & 7](16 + (x >> 8) % 512);
		}
		next += 0.01;
		double d = next - now();
		if (d > 0) {
			struct timespec ts = {0, (long)(d * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	printf("soak %lu\n", i);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 2 && !strcmp(argv[1], "soak"))
		return soak(atof(argv[2]));
	truth_init();
	truth_setname("liveleak");
	for (int i = 0; i < LEAK_N; i++)
		kept[nkept++] = leak_here(LEAK_SIZE);
	for (int i = 0; i < 200; i++)
		churn(64);
	for (int i = 0; i < SMALL_N; i++)
		kept[nkept++] = keep_small(SMALL_SIZE);
	truth_write();
	printf("leaked\n");
	wait_stdin();
	return 0;
}
