// unwind_oracle: allocations whose true call stacks glibc's DWARF unwinder
// (backtrace()) recorded right before each one (unwind_truth.h), in code
// built -O2 -fomit-frame-pointer: no frame pointer anywhere in the program.
//
// Four threads each run rounds of a 40-level recursion through functions
// of five different frame shapes (small, medium, large and very large
// arrays, and many callee-saved registers), allocating with malloc, new and
// new[] on the way down; at the bottom, by round: std::sort with an
// allocating comparator (libstdc++'s algorithm calling back into the
// program), qsort with an allocating callback (libc calling back), fopen
// and the first read (malloc inside libc), std::string growth (operator
// new inside libstdc++.so). The main thread then does the library work
// itself, so that those stacks go through libc or libstdc++ to main.
//
// Arguments (any order): "dlopen" also calls into unwind_dl.so (beside the
// program, built the same way) from every thread (so does a set
// $UNWIND_ORACLE_DLOPEN); "fork" runs everything
// in a forked child first (its record is $MEMTRACE_TRUTH.child), then in
// the parent; "exec" records a recursion, writes $MEMTRACE_TRUTH.pre and
// execs itself without "exec"; "many" ends with many distinct stacks
// (many_stacks). With $MEMTRACE_TEST_WAIT set it writes
// "ready" to stdout and waits for one byte on stdin before any recorded
// work (attach mode).
#include "unwind_truth.h"
#include <algorithm>
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <new>
#include <pthread.h>
#include <stdio.h>
#include <string>
#include <sys/wait.h>

static const int DEPTH = 40;
static const int ROUNDS = 11;
static const int THREADS = 4;

typedef void (*ut_cb)(int salt);
static void (*g_dl_work)(int salt, ut_cb cb);

// ---------------------------------------------------------------------------
// Allocations whose stacks end in libc or libstdc++.

// file_work: fopen's malloc of the FILE and the first read's malloc of its
// buffer, both inside libc, each recorded from the function that called
// into libc.
UT_NOINLINE static void file_work(void)
{
	void *bt[UT_MAXF];
	int n = backtrace(bt, UT_MAXF);
	UT_BARRIER();
	FILE *f = fopen("/proc/self/exe", "r");
	UT_BARRIER();
	if (!f)
		ut_die("unwind_oracle: fopen /proc/self/exe failed\n");
	// glibc's FILE is the start of a private, larger struct: its size
	// lies between these.
	size_t lo = sizeof(FILE), hi = malloc_usable_size(f);
	ut_record("malloc", lo, hi, f, "i:libc.so.6", bt, n);

	n = backtrace(bt, UT_MAXF);
	UT_BARRIER();
	int c = fgetc(f);
	UT_BARRIER();
	if (c == EOF || !f->_IO_buf_base)
		ut_die("unwind_oracle: the first read allocated no buffer\n");
	size_t bufsz = (size_t)(f->_IO_buf_end - f->_IO_buf_base);
	ut_record("malloc", bufsz, 0, f->_IO_buf_base, "i:libc.so.6", bt, n);

	// fclose frees the buffer, then the FILE.
	UT_FREE("free", bufsz, f->_IO_buf_base);
	ut_record("free", lo, hi, f, "-", 0, 0);
	fclose(f);
	UT_BARRIER();
}

static const char chunk[512] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// string_work: std::string's append reallocates inside libstdc++.so
// (_M_append, _M_mutate, _M_create, then operator new).
UT_NOINLINE static void string_work(int salt)
{
	std::string s;
	for (int i = 1; i <= 3; i++) {
		const char *old = s.data();
		size_t oldcap = s.capacity();
		void *bt[UT_MAXF];
		int n = backtrace(bt, UT_MAXF);
		UT_BARRIER();
		s.append(chunk, (size_t)(40 * i + salt % 7));
		UT_BARRIER();
		if (s.data() == old)
			ut_die("unwind_oracle: the string did not grow\n");
		ut_record("new", s.capacity() + 1, 0, s.data(), "i:libstdc++.so.6", bt, n);
		if (oldcap > 15) // the old buffer was on the heap, not in the string
			UT_FREE("delete", oldcap + 1, old);
	}
	UT_FREE("delete", s.capacity() + 1, s.data());
}

// ---------------------------------------------------------------------------
// Callbacks from library code into the program.

struct AllocLess {
	UT_NOINLINE bool operator()(int a, int b) const
	{
		if (((a ^ b) & 3) == 0) {
			size_t n = 64 + (size_t)(a & 63);
			void *p = UT_ALLOC("malloc", n, malloc(n));
			UT_FREE("free", n, p);
			free(p);
		}
		return a < b;
	}
};

static void fill(int *v, int n, int salt)
{
	unsigned x = 2463534242u + (unsigned)salt * 977u;
	for (int i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		v[i] = (int)(x % 1000);
	}
}

// sort_work: 24 elements, so that std::sort partitions before its
// insertion sort (a deeper call chain inside the algorithm).
UT_NOINLINE static void sort_work(int salt)
{
	int v[24];
	fill(v, 24, salt);
	std::sort(v, v + 24, AllocLess());
	UT_BARRIER();
	for (int i = 1; i < 24; i++)
		if (v[i - 1] > v[i])
			ut_die("unwind_oracle: std::sort did not sort\n");
}

UT_NOINLINE static int alloc_cmp(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;
	if (((a ^ b) & 3) == 1) {
		size_t n = 200 + (size_t)(b & 63);
		void *p = UT_ALLOC("new", n, ::operator new(n));
		UT_FREE("delete", n, p);
		::operator delete(p);
	}
	return (a > b) - (a < b);
}

// qsort_work: few enough bytes that glibc's qsort sorts in a stack buffer
// and allocates nothing of its own.
UT_NOINLINE static void qsort_work(int salt)
{
	int v[20];
	fill(v, 20, salt + 1);
	qsort(v, 20, sizeof v[0], alloc_cmp);
	UT_BARRIER();
	for (int i = 1; i < 20; i++)
		if (v[i - 1] > v[i])
			ut_die("unwind_oracle: qsort did not sort\n");
}

// dl_callback: the library calls the program back.
UT_NOINLINE static void dl_callback(int salt)
{
	size_t n = 1500 + (size_t)salt;
	void *p = UT_ALLOC("malloc", n, malloc(n));
	UT_FREE("free", n, p);
	free(p);
}

// ---------------------------------------------------------------------------
// The recursion: five frame shapes, one after the other, each level
// calling the next through the table (one frame per level).

UT_NOINLINE static void leaf(int round)
{
	switch (round % 4) {
	case 1:
		sort_work(round);
		break;
	case 2:
		qsort_work(round);
		break;
	case 3:
		file_work();
		string_work(round);
		break;
	}
	if (g_dl_work && round % 2 == 0)
		g_dl_work(round, dl_callback);
	UT_BARRIER();
}

#define ALLOC_AT_LEVEL()                                                                                   \
	do {                                                                                               \
		if (lvl % 8 != 7 && lvl != DEPTH)                                                          \
			break;                                                                             \
		size_t n_ = 1000 + 16 * (size_t)lvl + (size_t)round;                                       \
		switch ((lvl / 8 + round) % 3) {                                                           \
		case 0: {                                                                                  \
			void *p_ = UT_ALLOC("malloc", n_, malloc(n_));                                     \
			UT_FREE("free", n_, p_);                                                           \
			free(p_);                                                                          \
			break;                                                                             \
		}                                                                                          \
		case 1: {                                                                                  \
			void *p_ = UT_ALLOC("new", n_, ::operator new(n_));                                \
			UT_FREE("delete", n_, p_);                                                         \
			::operator delete(p_);                                                             \
			break;                                                                             \
		}                                                                                          \
		default: {                                                                                 \
			void *p_ = UT_ALLOC("new[]", n_, ::operator new[](n_));                            \
			UT_FREE("delete[]", n_, p_);                                                       \
			::operator delete[](p_);                                                           \
			break;                                                                             \
		}                                                                                          \
		}                                                                                          \
	} while (0)

typedef void (*level_fn)(int, int);
extern level_fn const levels[5];

// An array of BYTES on the stack, the level's allocation, the next level;
// the volatile read after the call keeps the frame (no tail call).
#define LEVEL_FN(name, BYTES)                                                                              \
	UT_NOINLINE static void name(int lvl, int round)                                                   \
	{                                                                                                  \
		volatile char buf[BYTES];                                                                  \
		buf[0] = (char)lvl;                                                                        \
		buf[BYTES - 1] = (char)round;                                                              \
		ALLOC_AT_LEVEL();                                                                          \
		if (lvl < DEPTH)                                                                           \
			levels[(lvl + 1) % 5](lvl + 1, round);                                             \
		else                                                                                       \
			leaf(round);                                                                       \
		UT_BARRIER();                                                                              \
		if (buf[0] != (char)lvl || buf[BYTES - 1] != (char)round)                                  \
			abort();                                                                           \
	}

LEVEL_FN(level_small, 24)
LEVEL_FN(level_medium, 320)
LEVEL_FN(level_large, 2600)
LEVEL_FN(level_huge, 9000)

static volatile uint64_t seeds[6] = {3, 5, 7, 11, 13, 17};

// level_regs keeps six values live across the call: its frame is pushed
// callee-saved registers (rbp among them, as a plain register).
UT_NOINLINE static void level_regs(int lvl, int round)
{
	uint64_t a = seeds[0] * (uint64_t)lvl, b = seeds[1] + (uint64_t)round, c = seeds[2] ^ (uint64_t)lvl;
	uint64_t d = seeds[3] * (uint64_t)round, e = seeds[4] + (uint64_t)lvl, f = seeds[5] ^ (uint64_t)round;
	ALLOC_AT_LEVEL();
	if (lvl < DEPTH)
		levels[(lvl + 1) % 5](lvl + 1, round);
	else
		leaf(round);
	UT_BARRIER();
	if (a + b + c + d + e + f != seeds[0] * (uint64_t)lvl + seeds[1] + (uint64_t)round +
					     (seeds[2] ^ (uint64_t)lvl) + seeds[3] * (uint64_t)round + seeds[4] +
					     (uint64_t)lvl + (seeds[5] ^ (uint64_t)round))
		abort();
}

level_fn const levels[5] = {level_small, level_medium, level_large, level_huge, level_regs};

// step enters the recursion at level lvl.
UT_NOINLINE static void step(int lvl, int round)
{
	levels[lvl % 5](lvl, round);
	UT_BARRIER();
}

// ---------------------------------------------------------------------------
// "many": FAN_LEVELS levels, each entered from one of two call sites by a
// bit of the value, make 2^FAN_LEVELS distinct stacks, each allocated
// twice in two passes: more stacks than a small stack table of the library
// holds (MEMTRACE_STACK_IDS), so its ids are forgotten, evicted and sent
// again between two events of one stack.

static const int FAN_LEVELS = 10;

UT_NOINLINE static void fan(unsigned bits, int lvl);

UT_NOINLINE static void fan_one(unsigned bits, int lvl)
{
	fan(bits, lvl);
	UT_BARRIER();
}

UT_NOINLINE static void fan_zero(unsigned bits, int lvl)
{
	fan(bits, lvl);
	UT_BARRIER();
}

UT_NOINLINE static void fan(unsigned bits, int lvl)
{
	if (lvl == 0) {
		size_t n = 64 + (bits & 255);
		void *p = UT_ALLOC("malloc", n, malloc(n));
		UT_FREE("free", n, p);
		free(p);
	} else if (bits & 1) {
		fan_one(bits >> 1, lvl - 1);
	} else {
		fan_zero(bits >> 1, lvl - 1);
	}
	UT_BARRIER();
}

static void many_stacks(void)
{
	for (int pass = 0; pass < 2; pass++)
		for (unsigned v = 0; v < (1u << FAN_LEVELS); v++)
			fan(v, FAN_LEVELS);
}

// ---------------------------------------------------------------------------

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	for (int r = 0; r < ROUNDS; r++)
		step(0, r);
	sort_work(100 + id);
	qsort_work(100 + id);
	file_work();
	string_work(id);
	if (g_dl_work)
		g_dl_work(id + 10, dl_callback);
	UT_BARRIER();
	return 0;
}

static char self[PATH_MAX];

static void load_library(void)
{
	char path[PATH_MAX];
	strcpy(path, self);
	char *slash = strrchr(path, '/');
	strcpy(slash + 1, "unwind_dl.so");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		ut_die("unwind_oracle: dlopen unwind_dl.so failed (build it beside the program)\n");
	void (*init)(ut_record_fn) = (void (*)(ut_record_fn))dlsym(h, "unwind_dl_init");
	g_dl_work = (void (*)(int, ut_cb))dlsym(h, "unwind_dl_work");
	if (!init || !g_dl_work)
		ut_die("unwind_oracle: dlsym in unwind_dl.so failed\n");
	init(ut_record);
}

static void run_all(bool dl)
{
	if (dl)
		load_library();
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], 0, worker, (void *)(intptr_t)i) != 0)
			ut_die("unwind_oracle: pthread_create failed\n");
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], 0);
	// The main thread's own records start here: stacks through the
	// libraries to main.
	file_work();
	string_work(5);
	step(DEPTH - 9, 1); // the last levels, then std::sort
	UT_BARRIER();
}

int main(int argc, char **argv)
{
	// The first backtrace() loads libgcc_s (dlopen allocates): before
	// any record, and before an attach.
	void *warm[4];
	backtrace(warm, 4);
	// Under qemu-user memtrace builds the files' unwind tables about as
	// slowly as this program runs (libc's in 0.3 s, natively in ms): the
	// cross test pauses here, once, so that its share of stacks over the
	// rows measures the walk rather than that race.
	if (const char *ms = getenv("UNWIND_ORACLE_PAUSE_MS")) {
		usleep((useconds_t)atoi(ms) * 1000);
		unsetenv("UNWIND_ORACLE_PAUSE_MS");
	}
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 32);
	if (sl <= 0)
		ut_die("unwind_oracle: readlink /proc/self/exe failed\n");
	self[sl] = 0;
	// The variable is for attach mode, where the harness passes no arguments.
	bool dl = getenv("UNWIND_ORACLE_DLOPEN") != 0, fk = false, ex = false, many = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "dlopen") == 0)
			dl = true;
		else if (strcmp(argv[i], "fork") == 0)
			fk = true;
		else if (strcmp(argv[i], "exec") == 0)
			ex = true;
		else if (strcmp(argv[i], "many") == 0)
			many = true;
		else
			ut_die("unwind_oracle: arguments are dlopen, fork, exec, many\n");
	}
	if (getenv("MEMTRACE_TEST_WAIT")) {
		char c;
		if (write(1, "ready\n", 6) != 6)
			ut_die("unwind_oracle: cannot write ready\n");
		if (read(0, &c, 1) != 1)
			ut_die("unwind_oracle: stdin closed before the go byte\n");
	}
	if (ex) {
		step(DEPTH - 12, 3); // ends in fopen and std::string
		ut_write(".pre");
		static char *args[4];
		int k = 0;
		args[k++] = self;
		if (dl)
			args[k++] = (char *)"dlopen";
		if (fk)
			args[k++] = (char *)"fork";
		args[k] = 0;
		execv(self, args);
		ut_die("unwind_oracle: execv failed\n");
	}
	if (fk) {
		pid_t pid = fork();
		if (pid < 0)
			ut_die("unwind_oracle: fork failed\n");
		if (pid == 0) {
			ut_forked();
			run_all(dl);
			ut_write(".child");
			exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			ut_die("unwind_oracle: the forked child failed\n");
	}
	run_all(dl);
	if (many)
		many_stacks();
	ut_write("");
	return 0;
}
