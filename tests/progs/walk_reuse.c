/*
 * walk_reuse: allocations whose stacks the library's walk could take
 * from the thread's previous walk where it must not (tests/walk_reuse_test.go),
 * each recorded with glibc's backtrace() (unwind_truth.h). Built like the
 * stack oracle: -O2, no frame pointer.
 *
 * Each thread (main, then two workers one after the other, so that the
 * second takes the first one's record slot) runs:
 *   - callers: one function allocating, called alternately from two call
 *     sites at the same depth: the same sp, another return address;
 *   - slots: the same two inner frames under two outer callers: equal
 *     state where the walk starts, a saved return address that changed;
 *   - depths: a recursion allocating on its way down and up, to depths
 *     that go up and down: the same sp at another depth;
 *   - vla: a frame addressed through its frame pointer (a VLA), of sizes
 *     that repeat and change;
 *   - jumps: longjmp out of a deep stack, then allocations over the
 *     abandoned frames; and in the main thread, allocations on a
 *     coroutine's stack (swapcontext) between the main stack's;
 *   - signals: a signal handler that allocates, raised from two call
 *     sites;
 *   - repeat: one stack, allocated from again and again (the case that
 *     reuse is for: the test requires that it happens);
 *   - ids: one stack, reused whole from its kept walk again and again,
 *     between runs of twelve others of one depth from another call site
 *     (kept apart): with few stack ids (MEMTRACE_STACK_IDS) the thread's
 *     stack table starts over during each run, and the one stack's id
 *     remembered for its kept walk is then another stack's.
 * With "fork" it first does it all in a forked child ($MEMTRACE_TRUTH.child),
 * which starts with its parent's record of the last walk.
 */
#include "unwind_truth.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <ucontext.h>

static void *volatile sink;

UT_NOINLINE static void *leaf(size_t n)
{
	void *p = UT_ALLOC("malloc", n, malloc(n));
	UT_BARRIER();
	return p;
}

static void drop(void *p, size_t n)
{
	UT_FREE("free", n, p);
	free(p);
}

// ---------------------------------------------------------------------------
// callers: the constants keep the two from being merged into one.

UT_NOINLINE static void *via_a(size_t n)
{
	void *p = leaf(n + 1);
	UT_BARRIER();
	return p;
}

UT_NOINLINE static void *via_b(size_t n)
{
	void *p = leaf(n + 2);
	UT_BARRIER();
	return p;
}

// held: allocations freed in a batch, so that allocations follow each
// other: a walk's previous one is then the previous allocation's.
#define HELD 8
static void *held[HELD];
static size_t held_n[HELD];

static void hold(int i, void *p, size_t n)
{
	held[i % HELD] = p;
	held_n[i % HELD] = n;
	if (i % HELD == HELD - 1)
		for (int k = 0; k < HELD; k++)
			drop(held[k], held_n[k]);
}

UT_NOINLINE static void callers(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		size_t n = 16 + (size_t)(i % 5);
		void *p = (i & 1) ? via_b(n) : via_a(n);
		hold(i, p, n + ((i & 1) ? 2 : 1));
	}
}

// ---------------------------------------------------------------------------
// slots

UT_NOINLINE static void *mid(size_t n)
{
	void *p = leaf(n);
	UT_BARRIER();
	return p;
}

UT_NOINLINE static void *outer1(size_t n)
{
	void *p = mid(n + 3);
	UT_BARRIER();
	return p;
}

UT_NOINLINE static void *outer2(size_t n)
{
	void *p = mid(n + 4);
	UT_BARRIER();
	return p;
}

UT_NOINLINE static void slots(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		size_t n = 24;
		// Twice from one, then twice from the other: reuse is right
		// within a pair and wrong across.
		void *p = (i & 2) ? outer2(n) : outer1(n);
		hold(i, p, n + ((i & 2) ? 4 : 3));
	}
}

// ---------------------------------------------------------------------------
// depths

UT_NOINLINE static int down(int d, int at)
{
	if (d % 3 == 0)
		drop(leaf(32), 32);
	int r = 0;
	if (d < at)
		r = down(d + 1, at);
	UT_BARRIER();
	if (d % 4 == 1)
		drop(leaf(48), 48);
	return r + 1;
}

UT_NOINLINE static void depths(void)
{
	static const int at[] = {5, 40, 6, 39, 20, 21, 19, 22, 18, 60, 2, 61, 3, 33, 33, 34, 32};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
		sink = (void *)(intptr_t)down(0, at[i]);
}

// ---------------------------------------------------------------------------
// vla: the VLA makes the compiler address the frame through its frame
// pointer, and its size moves the frames below it.

UT_NOINLINE static void *in_vla(int k)
{
	volatile char buf[k];
	buf[0] = (char)k;
	void *p = leaf((size_t)(40 + buf[0] % 3));
	UT_BARRIER();
	return p;
}

UT_NOINLINE static void vla(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		int k = 1 + (i / 3) % 40; // three of a size, then the next
		void *p = in_vla(k);
		drop(p, (size_t)(40 + k % 3));
	}
}

// ---------------------------------------------------------------------------
// jumps

static jmp_buf jb;
static volatile int jump = 1; // the compiler is not to know that dive never returns

UT_NOINLINE static void dive(int d)
{
	if (d > 0) {
		dive(d - 1);
		UT_BARRIER();
		return;
	}
	drop(leaf(56), 56);
	if (jump)
		longjmp(jb, 1);
}

static ucontext_t co_main, co_side;
static char co_stack[64 << 10] __attribute__((aligned(16)));

UT_NOINLINE static void side(void)
{
	for (int i = 0; i < 4; i++) {
		drop(leaf(72), 72);
		swapcontext(&co_side, &co_main);
	}
}

UT_NOINLINE static void jumps(int rounds, int coroutine)
{
	for (volatile int i = 0; i < rounds; i++) {
		if (!setjmp(jb))
			dive(4 + i % 7);
		UT_BARRIER();
		drop(via_a(64), 65);
	}
	if (!coroutine)
		return;
	getcontext(&co_side);
	co_side.uc_stack.ss_sp = co_stack;
	co_side.uc_stack.ss_size = sizeof co_stack;
	co_side.uc_link = &co_main;
	makecontext(&co_side, side, 0);
	for (int i = 0; i < 4; i++) {
		swapcontext(&co_main, &co_side);
		drop(via_b(64), 66);
	}
}

// ---------------------------------------------------------------------------
// signals

static volatile int n_signals;

static void on_signal(int sig)
{
	(void)sig;
	hold(n_signals++, leaf(80), 80);
}

UT_NOINLINE static void raise_a(void)
{
	raise(SIGUSR1);
	UT_BARRIER();
}

UT_NOINLINE static void raise_b(void)
{
	raise(SIGUSR1);
	UT_BARRIER();
}

UT_NOINLINE static void signals(int rounds)
{
	n_signals = 0;
	for (int i = 0; i < rounds; i++) {
		if (i % 3 == 2)
			raise_b();
		else
			raise_a();
		if (i % 5 == 4)
			drop(leaf(88), 88);
	}
}

// ---------------------------------------------------------------------------
// repeat

UT_NOINLINE static void repeat(int d, int rounds)
{
	if (d > 0) {
		repeat(d - 1, rounds);
		UT_BARRIER();
		return;
	}
	for (int i = 0; i < rounds; i++)
		drop(leaf(96), 96);
}

// ---------------------------------------------------------------------------
// ids: the fans are twelve functions of one frame size, called from one
// call site: their stacks differ in one return address, at one depth.

UT_NOINLINE static void *fan_leaf(size_t n)
{
	void *p = UT_ALLOC("malloc", n, malloc(n));
	UT_BARRIER();
	return p;
}

#define FAN(K)                                  \
	UT_NOINLINE static void *fan##K(size_t n) \
	{                                       \
		void *p = fan_leaf(n + K);      \
		UT_BARRIER();                   \
		return p;                       \
	}
FAN(0)
FAN(1)
FAN(2)
FAN(3)
FAN(4)
FAN(5)
FAN(6)
FAN(7)
FAN(8)
FAN(9)
FAN(10)
FAN(11)
#undef FAN

static void *(*const fans[])(size_t) = {fan0, fan1, fan2, fan3, fan4, fan5, fan6, fan7, fan8, fan9, fan10, fan11};

UT_NOINLINE static void ids(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < 3; k++)
			drop(leaf(112), 112);
		for (int k = 0; k < 12; k++) {
			void *(*volatile f)(size_t) = fans[k];
			drop(f(120), 120 + (size_t)k);
		}
	}
}

static void work(int coroutine)
{
	callers(200);
	slots(200);
	depths();
	vla(120);
	jumps(40, coroutine);
	signals(96);
	repeat(12, 300);
	ids(20);
}

static void *worker(void *arg)
{
	(void)arg;
	work(0);
	return 0;
}

static void run_all(void)
{
	for (int i = 0; i < 2; i++) {
		pthread_t th;
		// The thread's stack and TLS are allocated here, untraced by
		// the record.
		UT_GAP();
		if (pthread_create(&th, 0, worker, 0) != 0)
			ut_die("walk_reuse: pthread_create failed\n");
		pthread_join(th, 0);
	}
	work(1);
}

int main(int argc, char **argv)
{
	// The first backtrace() loads libgcc_s (dlopen allocates): before
	// any record.
	void *warm[4];
	backtrace(warm, 4);
	const char *ms = getenv("UNWIND_ORACLE_PAUSE_MS");
	if (ms)
		usleep((useconds_t)atoi(ms) * 1000);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, 0);
	int fk = argc > 1 && strcmp(argv[1], "fork") == 0;
	if (fk) {
		// The child's first walks find the parent's last one.
		drop(leaf(104), 104);
		pid_t pid = fork();
		if (pid < 0)
			ut_die("walk_reuse: fork failed\n");
		if (pid == 0) {
			ut_forked();
			drop(leaf(104), 104);
			run_all();
			ut_write(".child");
			exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			ut_die("walk_reuse: the forked child failed\n");
	}
	run_all();
	ut_write("");
	return 0;
}
