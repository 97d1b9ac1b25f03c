// mt.h: what every part of memtrace-preload.so shares: the configuration
// and process state set by the constructor (init.c), the reentrancy flag,
// the clock (clock.c), raw memory and spin locks, and the sink the hooks
// send events to. Include it first (it sets _GNU_SOURCE).
//
// The parts: hooks.c (the interposed functions, the bootstrap arena),
// early.c (calls before the constructor), table.c (ptr -> size, text mode),
// shm.c (binary mode: records in memtrace's shared region), text*.c (text
// mode: memtrack's lines, and its TCP server in tcp.c), stack.c (call
// stacks), clock.c, init.c (options, constructor). mt_abi.h is the ABI
// with the Go reader.
#ifndef MT_H
#define MT_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "mt_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define TLS_IE __attribute__((tls_model("initial-exec")))
#define VERSION "0.1.0"

// Everything declared here is internal to the library: hidden, so that
// calls and loads between the files need no PLT or GOT.
#pragma GCC visibility push(hidden)

// ---------------------------------------------------------------------------
// State set by the constructor (init.c).

extern volatile int g_ready;   // constructor done: log events
extern volatile int g_off;     // tracing disabled in this process
extern volatile int g_exiting; // process exit: write unbuffered
extern size_t min_size;
extern int stack_depth;
extern int walk_backtrace; // MEMTRACE_WALK=backtrace (tests): never the rows
extern uint32_t stack_ids; // a thread's stack table starts over past this many ids (MEMTRACE_STACK_IDS, tests)
extern int mmap_files;
extern int follow;
extern char stack_threads[256];
extern char track_threads[256];
extern volatile unsigned name_gen; // bumped by every rename
extern pid_t g_pid;
extern pthread_key_t exit_key;
extern uintptr_t self_base; // this library's load address (own frames)

// --sample (sample.c): the mean bytes between samples (0: every event),
// the countdown, and the table of the live samples.
extern uint64_t sample_rate;
extern uint64_t sample_untracked; // samples the table had no room for
int sample_take(uint64_t size);
int sample_keep(const void *p);
int sample_forget(const void *p);
void sample_atfork_prepare(void);
void sample_atfork_parent(void);
void sample_atfork_child(void);

// t_in: the thread is inside a hook (or is the library's own): calls pass
// straight through, so that one outermost call logs one event.
extern __thread int t_in TLS_IE;

// t_caller: the outermost hook's return address. 32-bit ARM's backtrace()
// (the .ARM.exidx unwinder) reports no frame for a caller that has no
// unwind entry (EXIDX_CANTUNWIND, much of libc: stdio's buffers), so a
// stack taken inside such a call would be the library's frames alone;
// stack.c puts this address in their place. Elsewhere the walk over the
// rows keys its kept walks on it (walk.c, wr_pick): a loop's malloc and
// free are two call sites, each with its own.
extern __thread uintptr_t t_caller TLS_IE;
#define SET_CALLER() (t_caller = (uintptr_t)__builtin_return_address(0))

// resolve looks up the real functions (hooks.c); the hooks call it when
// they are reached before the constructor.
void resolve(void);
size_t parse_size(const char *s, size_t dflt); // bytes, K/M/G suffixes
int name_matches(const char *name, const char *list);
void err_line(const char *a, const char *b);
void read_comm(char *nm); // 17 bytes
void read_cmdline(char *dst, size_t n);

// ---------------------------------------------------------------------------
// The sink: where the hooks send events. One per mode, chosen when the
// mode is known (the early buffer before the constructor, then binary
// records or text lines), so that the hooks test no output mode. A
// free-like call is split around the real call: pre runs before it (the
// address may be reused by another thread as soon as it returns), post
// after it with the outcome; mt_call_t carries what pre found.

typedef struct {
	uint64_t ts, size, val;
	int log, had, slot, early;
} mt_call_t;

typedef struct {
	void (*alloc)(int op, uint64_t size, const void *p, uint64_t kind);
	// free: the whole call, real included (one indirect call for the
	// commonest free-like calls: free, plain delete and delete[]).
	void (*free)(int op, void *p, void (*real)(void *));
	void (*free_pre)(mt_call_t *c, const void *p);
	void (*free_post)(mt_call_t *c, int op, const void *p);
	// realloc, reallocarray; p may be NULL; q is NULL when it failed.
	void (*realloc_pre)(mt_call_t *c, const void *p);
	void (*realloc_post)(mt_call_t *c, int op, const void *p, const void *q, size_t n);
	// munmap (unmap_post) and mremap (remap_post, r == MAP_FAILED when it failed).
	void (*unmap_pre)(mt_call_t *c, const void *p);
	void (*unmap_post)(mt_call_t *c, const void *p, size_t len, int ok);
	void (*remap_post)(mt_call_t *c, const void *old, size_t oldlen, const void *r, size_t newlen);
	// exec and _exit discard the process's memory: write what is pending.
	void (*before_exec)(void);
	void (*process_exit)(void);
} mt_sink;

extern const mt_sink *mt_out;
extern const mt_sink early_sink;      // early.c: before the mode is known
extern const mt_sink bin_sink;        // shm.c
extern const mt_sink text_sink;       // text.c
extern const mt_sink text_unbuf_sink; // text.c: MEMTRACK_BUFFER_SIZE=0

// early_replay closes the early buffer and logs what it holds, in order,
// through the current sink. Calls the early buffer cannot take go to its
// fallback: the text sink of the mode the constructor picked.
void early_replay(void);
void early_set_fallback(const mt_sink *s);
// text_start sets up the text mode (the output, the start line) and makes
// its sink current (text.c).
void text_start(void);

static inline const mt_sink *sink(void)
{
	return __atomic_load_n(&mt_out, __ATOMIC_RELAXED);
}

static inline void set_sink(const mt_sink *s)
{
	__atomic_store_n(&mt_out, s, __ATOMIC_RELEASE);
}

// kind bits of alloc (the table's value bits, table.h).
#define V_LOGGED 1u
#define V_MMAP 2u

// ---------------------------------------------------------------------------
// Clock: µs since the session started (the first traced process's
// constructor; exec'd children inherit the epoch so that one log has one
// time axis). x86-64 reads the TSC, arm64 the virtual counter, both scaled
// to CLOCK_MONOTONIC; elsewhere clock_gettime. clock.c calibrates.

extern uint64_t epoch_ns;       // CLOCK_MONOTONIC at session start
extern int use_counter;
extern uint64_t cnt0;           // counter at calibration
extern uint64_t mono0;          // CLOCK_MONOTONIC ns at calibration
extern uint64_t cnt_mult;       // ns = (cnt - cnt0) * mult >> 32
extern uint64_t inherited_mult; // an exec'd child reuses the session's calibration

void clock_init(int calibrate_ms);

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t read_counter(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ __volatile__("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

static inline uint64_t now_us(void)
{
	int64_t ns;
	if (LIKELY(use_counter)) {
		uint64_t d = read_counter() - cnt0;
		// Split to avoid overflowing 64 bits for long runs.
		uint64_t hi = (d >> 32) * cnt_mult, lo = ((d & 0xffffffffu) * cnt_mult) >> 32;
		ns = (int64_t)(mono0 - epoch_ns) + (int64_t)(hi + lo);
	} else {
		ns = (int64_t)(mono_ns() - epoch_ns);
	}
	return ns > 0 ? (uint64_t)ns / 1000 : 0;
}

// ---------------------------------------------------------------------------
// Raw memory for the library's own structures: never through the hooks.

static inline void *raw_map(size_t n)
{
#ifdef SYS_mmap2
	void *p = (void *)syscall(SYS_mmap2, 0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#else
	void *p = (void *)syscall(SYS_mmap, 0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
	return p == MAP_FAILED ? NULL : p;
}

static inline void raw_unmap(void *p, size_t n)
{
	syscall(SYS_munmap, p, n);
}

static inline pid_t gettid_raw(void)
{
	return (pid_t)syscall(SYS_gettid);
}

// ---------------------------------------------------------------------------
// Spin locks: tiny critical sections, and safe to reset in a fork child.

typedef struct {
	int v;
} spin_t;

static inline void spin_lock(spin_t *l)
{
	int n = 0;
	while (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
			if (++n > 100)
				sched_yield();
		}
	}
}

static inline void spin_unlock(spin_t *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}

#pragma GCC visibility pop

#endif
