// memtrace-preload.so: memtrace's LD_PRELOAD fallback and a drop-in for
// memtrack.so. It interposes every allocation function of SPEC §3 and writes
// memtrack-format lines (byte-identical with the Go package logfmt) into
// per-thread buffers that are flushed with write(2).
//
// Design notes (docs/preload.md has the user-facing version):
//   - The hot path takes no global lock: one thread-local state, one shard
//     lock of the ptr->size table (needed for free sizes), hand-written
//     integer formatting into the thread's buffer, a cheap clock.
//   - Reentrancy: a thread-local flag makes calls made by the allocator or by
//     this library (malloc inside strdup, inside operator new, ...) pass
//     straight through, so that one outermost call logs one event.
//   - Bootstrap: dlsym may allocate before the real functions are known;
//     those requests are served from a static arena. Calls made before the
//     constructor (other libraries' constructors) are kept in a static
//     buffer and logged once the constructor has set up the output.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VERSION "0.1.0"

#if __SIZEOF_SIZE_T__ == 8
#define ZSZ "m"
#else
#define ZSZ "j"
#endif

// ---------------------------------------------------------------------------
// Ops: the op column, padded as logfmt pads it ("%-10s ts=").

enum {
	OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_FREE, OP_NEW,
	OP_NEWARR, OP_DELETE, OP_DELETEARR, OP_STRDUP, OP_STRNDUP, OP_MMAP,
	OP_MUNMAP, OP_MREMAP, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_MEMALIGN,
	OP_VALLOC, OP_PVALLOC, OP_EXIT, NOPS
};

static const char *const op_name[NOPS] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "new", "new[]",
	"delete", "delete[]", "strdup", "strndup", "mmap", "munmap", "mremap",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc", "EXIT",
};
static char op_col[NOPS][24];
static unsigned char op_col_len[NOPS];

// ---------------------------------------------------------------------------
// Real functions.

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static void (*real_free)(void *);
static char *(*real_strdup)(const char *);
static char *(*real_strndup)(const char *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int (*real_munmap)(void *, size_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static int (*real_pthread_setname_np)(pthread_t, const char *);
static int (*real_prctl)(int, unsigned long, unsigned long, unsigned long, unsigned long);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);

static volatile int resolving;
static volatile int resolved;

// Bootstrap arena for allocations made while dlsym runs. Each block has a
// size header so that realloc of a bootstrap block can copy it.
static char boot_arena[64 << 10] __attribute__((aligned(64)));
static size_t boot_used;

static int is_boot(const void *p)
{
	return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t n)
{
	size_t need = (n + 31) & ~(size_t)15;
	size_t off = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
	if (off + need > sizeof boot_arena)
		return NULL;
	*(size_t *)(boot_arena + off) = n;
	return boot_arena + off + 16;
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)((const char *)p - 16);
}

static void *sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void resolve(void)
{
	if (resolved)
		return;
	resolving = 1;
	real_malloc = sym("malloc");
	real_calloc = sym("calloc");
	real_realloc = sym("realloc");
	real_free = sym("free");
	real_reallocarray = sym("reallocarray");
	real_strdup = sym("strdup");
	real_strndup = sym("strndup");
	real_posix_memalign = sym("posix_memalign");
	real_aligned_alloc = sym("aligned_alloc");
	real_memalign = sym("memalign");
	real_valloc = sym("valloc");
	real_pvalloc = sym("pvalloc");
	real_mmap = sym("mmap");
	real_mmap64 = sym("mmap64");
	real_munmap = sym("munmap");
	real_mremap = sym("mremap");
	real_pthread_setname_np = sym("pthread_setname_np");
	real_prctl = sym("prctl");
	real_execve = sym("execve");
	real_execvpe = sym("execvpe");
	real_fexecve = sym("fexecve");
	resolving = 0;
	__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

// ---------------------------------------------------------------------------
// Raw memory for the library's own structures: never through the hooks.

static void *raw_map(size_t n)
{
#ifdef SYS_mmap2
	void *p = (void *)syscall(SYS_mmap2, 0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#else
	void *p = (void *)syscall(SYS_mmap, 0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
	return p == MAP_FAILED ? NULL : p;
}

static void raw_unmap(void *p, size_t n)
{
	syscall(SYS_munmap, p, n);
}

// ---------------------------------------------------------------------------
// Spin locks: tiny critical sections, and safe to reset in a fork child.

typedef struct { int v; } spin_t;

static void spin_lock(spin_t *l)
{
	int n = 0;
	while (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
			if (++n > 100)
				sched_yield();
		}
	}
}

static void spin_unlock(spin_t *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}

// ---------------------------------------------------------------------------
// ptr -> size table, sharded, open addressing with linear probing and
// backward-shift deletion. The value packs size<<2 | mmap<<1 | logged.

#define NSHARD 64
#define V_LOGGED 1u
#define V_MMAP 2u

typedef struct { uintptr_t key; uint64_t val; } slot_t;
typedef struct {
	spin_t lock;
	uint32_t cap, n;
	slot_t *slots;
} __attribute__((aligned(64))) shard_t;

static shard_t shards[NSHARD];

static inline uint64_t hash_ptr(uintptr_t p)
{
	return (uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ull;
}

static void shard_grow(shard_t *s)
{
	uint32_t ncap = s->cap ? s->cap * 2 : 1024;
	slot_t *ns = raw_map((size_t)ncap * sizeof(slot_t));
	if (!ns)
		return;
	for (uint32_t i = 0; i < s->cap; i++) {
		if (!s->slots[i].key)
			continue;
		uint32_t j = (uint32_t)(hash_ptr(s->slots[i].key) >> 20) & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = s->slots[i];
	}
	if (s->slots)
		raw_unmap(s->slots, (size_t)s->cap * sizeof(slot_t));
	s->slots = ns;
	s->cap = ncap;
}

static void tbl_put(const void *p, uint64_t val)
{
	uintptr_t k = (uintptr_t)p;
	uint64_t h = hash_ptr(k);
	shard_t *s = &shards[h >> 58];
	spin_lock(&s->lock);
	if ((s->n + 1) * 4 >= s->cap * 3)
		shard_grow(s);
	if (s->cap && (s->n + 1) < s->cap) {
		uint32_t m = s->cap - 1, j = (uint32_t)(h >> 20) & m;
		while (s->slots[j].key && s->slots[j].key != k)
			j = (j + 1) & m;
		if (!s->slots[j].key) {
			s->slots[j].key = k;
			s->n++;
		}
		s->slots[j].val = val;
	}
	spin_unlock(&s->lock);
}

// tbl_take removes p and reports whether it was there, with its value.
static int tbl_take(const void *p, uint64_t *val)
{
	uintptr_t k = (uintptr_t)p;
	uint64_t h = hash_ptr(k);
	shard_t *s = &shards[h >> 58];
	int found = 0;
	spin_lock(&s->lock);
	if (s->cap) {
		uint32_t m = s->cap - 1, j = (uint32_t)(h >> 20) & m;
		while (s->slots[j].key && s->slots[j].key != k)
			j = (j + 1) & m;
		if (s->slots[j].key == k) {
			*val = s->slots[j].val;
			found = 1;
			s->n--;
			// Backward shift: move later members of the cluster into
			// the hole when their home is not between hole and them.
			uint32_t hole = j, i = j;
			for (;;) {
				i = (i + 1) & m;
				if (!s->slots[i].key)
					break;
				uint32_t home = (uint32_t)(hash_ptr(s->slots[i].key) >> 20) & m;
				if (((i - home) & m) >= ((i - hole) & m)) {
					s->slots[hole] = s->slots[i];
					hole = i;
				}
			}
			s->slots[hole].key = 0;
		}
	}
	spin_unlock(&s->lock);
	return found;
}

// ---------------------------------------------------------------------------
// Configuration (from MEMTRACK_* / MEMTRACE_* variables).

static int out_fd = 2;
static int out_is_sock;
static volatile int out_dead;      // the reader went away: stop logging
static volatile int g_ready;       // constructor done: log events
static volatile int g_off;         // tracing disabled in this process
static volatile int g_exiting;     // process exit: write unbuffered
static volatile int g_bin;         // binary records to memtrace's shared region
static size_t min_size;
static int stack_depth;
static size_t buf_size = 64 << 10;
static int unbuffered;
static int mmap_files;
static int follow = 1;
static char stack_threads[256];
static char track_threads[256];
static volatile unsigned name_gen = 1;
static pid_t g_pid;
static pthread_key_t exit_key;
static uintptr_t self_base;

static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

// ---------------------------------------------------------------------------
// Clock: µs since the session started (the first traced process's
// constructor; exec'd children inherit the epoch so that one log has one
// time axis). x86-64 reads the TSC, arm64 the virtual counter, both scaled
// to CLOCK_MONOTONIC; elsewhere clock_gettime.

static uint64_t epoch_ns;        // CLOCK_MONOTONIC at session start
static int use_counter;
static uint64_t cnt0;            // counter at calibration
static uint64_t mono0;           // CLOCK_MONOTONIC ns at calibration
static uint64_t cnt_mult;        // ns = (cnt - cnt0) * mult >> 32
static uint64_t inherited_mult;  // an exec'd child reuses the session's calibration

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
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

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

static void clock_init(int calibrate_ms)
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
// Formatting: byte for byte what logfmt.AppendAlloc/AppendFree/AppendExit/
// AppendFrame/AppendMeta write. Callers leave 16 bytes of slack past every
// padded field.

static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static const uint64_t pow10_tab[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
	100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
	10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
	100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

static inline int ndigits(uint64_t v)
{
	int bits = 64 - __builtin_clzll(v | 1);
	int t = (bits * 1233) >> 12;
	int n = t + 1 - (v < pow10_tab[t]);
	return n ? n : 1;
}

// put_u writes the digits straight into place, back to front, two at a
// time: no temporary and no variable-length memcpy (which costs more than
// the digits themselves).
static inline char *put_u(char *o, uint64_t v)
{
	int n = ndigits(v);
	char *e = o + n, *s = e;
	while (v >= 100) {
		unsigned r = (unsigned)(v % 100);
		v /= 100;
		s -= 2;
		s[0] = digits2[2 * r];
		s[1] = digits2[2 * r + 1];
	}
	if (v >= 10) {
		s[-2] = digits2[2 * v];
		s[-1] = digits2[2 * v + 1];
	} else {
		s[-1] = (char)('0' + v);
	}
	return e;
}

static inline char *put_pad_u(char *o, uint64_t v, int w)
{
	memcpy(o, "                ", 16);
	char *e = put_u(o, v);
	return e - o < w ? o + w : e;
}

static inline char *put_hex(char *o, uint64_t v)
{
	static const char hx[] = "0123456789abcdef";
	int n = v ? (67 - __builtin_clzll(v)) / 4 : 1;
	for (int i = n - 1; i >= 0; i--) {
		o[i] = hx[v & 15];
		v >>= 4;
	}
	return o + n;
}

static inline char *put_ptr(char *o, uintptr_t p)
{
	if (!p) {
		memcpy(o, "(nil)", 5);
		return o + 5;
	}
	o[0] = '0';
	o[1] = 'x';
	return put_hex(o + 2, p);
}

static inline char *put_s(char *o, const char *s, size_t n)
{
	memcpy(o, s, n);
	return o + n;
}
#define PUT_LIT(o, lit) put_s(o, lit, sizeof(lit) - 1)

static void init_op_cols(void)
{
	for (int i = 0; i < NOPS; i++) {
		char *o = op_col[i];
		size_t n = strlen(op_name[i]);
		o = put_s(o, op_name[i], n);
		while (n < 10) {
			*o++ = ' ';
			n++;
		}
		o = PUT_LIT(o, " ts=");
		op_col_len[i] = (unsigned char)(o - op_col[i]);
	}
}

// ---------------------------------------------------------------------------
// Per-thread state. States live in raw mappings (not TLS) so that another
// thread can flush them at exit, exec and _exit.

#define LINE_MAX_EV 256
#define FRAME_MAX 1024

typedef struct tstate {
	// Owner only.
	char *buf;
	size_t cap;        // bytes mapped for buf
	size_t limit;      // flush when a record might pass this
	size_t pos;
	uint64_t total;
	unsigned gen;
	int tracked;
	int stacks;
	pid_t tid;
	char name[16];
	char prefix[64 + 16];
	int plen;
	// Shared, under flock.
	spin_t flock;
	size_t committed;  // end of the last complete record (release store)
	size_t flushed;    // start of what is not yet written
	struct tstate *next;
	size_t map_len;
} tstate;

#define T_EXITED ((tstate *)1)

static __thread tstate *t_state __attribute__((tls_model("initial-exec")));
static __thread int t_in __attribute__((tls_model("initial-exec")));

static spin_t reg_lock;
static tstate *reg_head;

static pid_t gettid_raw(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static int name_matches(const char *name, const char *list)
{
	// list is a comma-separated set of substrings; empty = all.
	if (!list[0])
		return 1;
	const char *p = list;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n && memmem(name, strlen(name), p, n))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static char *put_name15(char *o, const char *name)
{
	size_t n = strnlen(name, 15);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		*o++ = (c < ' ' || c == 0x7f) ? '?' : (char)c;
	}
	for (; n < 15; n++)
		*o++ = ' ';
	return o;
}

static void build_prefix(tstate *t)
{
	char *o = t->prefix;
	o = PUT_LIT(o, "[memtrack] tid=");
	char *s = o;
	o = put_u(o, (uint64_t)t->tid);
	while (o - s < 6)
		*o++ = ' ';
	o = PUT_LIT(o, " (");
	o = put_name15(o, t->name);
	o = PUT_LIT(o, ") ");
	t->plen = (int)(o - t->prefix);
}

static void refresh_name(tstate *t)
{
	char nm[17] = {0};
	t->gen = __atomic_load_n(&name_gen, __ATOMIC_RELAXED);
	if (syscall(SYS_prctl, PR_GET_NAME, nm, 0, 0, 0) != 0)
		nm[0] = 0;
	nm[15] = 0;
	if (strcmp(nm, t->name) != 0 || !t->plen) {
		memcpy(t->name, nm, 16);
		build_prefix(t);
	}
	t->tracked = name_matches(t->name, track_threads);
	t->stacks = stack_depth > 0 && name_matches(t->name, stack_threads);
}

// ---------------------------------------------------------------------------
// Output.

static void out_write(const char *p, size_t n)
{
	while (n > 0 && !out_dead) {
		ssize_t w;
		if (out_is_sock)
			w = send(out_fd, p, n, MSG_NOSIGNAL);
		else
			w = write(out_fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct timespec ts = {0, 1000000};
				nanosleep(&ts, NULL);
				continue;
			}
			// EPIPE, ECONNRESET, ENOSPC, EBADF: the reader is gone;
			// the program goes on untraced.
			out_dead = 1;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

// A pipe whose reader left would raise SIGPIPE: writers block it around the
// write and swallow a pending one, so the program never dies of it. Sockets
// use MSG_NOSIGNAL instead.
typedef struct { sigset_t old; int blocked; } wguard_t;

static void wlock(wguard_t *g)
{
	g->blocked = 0;
	if (!out_is_sock) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		g->blocked = pthread_sigmask(SIG_BLOCK, &set, &g->old) == 0;
	}
	pthread_mutex_lock(&write_mu);
}

static void wunlock(wguard_t *g)
{
	pthread_mutex_unlock(&write_mu);
	if (g->blocked) {
		if (out_dead && !sigismember(&g->old, SIGPIPE)) {
			sigset_t set;
			sigemptyset(&set);
			sigaddset(&set, SIGPIPE);
			struct timespec zero = {0, 0};
			while (sigtimedwait(&set, NULL, &zero) == SIGPIPE)
				;
		}
		pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	}
}

// out_write_locked serialises whole chunks so that a chunk's lines stay
// together on pipes and sockets, where write(2) is not atomic.
static void out_write_locked(const char *p, size_t n)
{
	if (!n)
		return;
	wguard_t g;
	wlock(&g);
	out_write(p, n);
	wunlock(&g);
}

// flush_state writes what is committed but not yet written. The owner and
// other threads (exit, exec) both use it.
static void flush_state(tstate *t)
{
	spin_lock(&t->flock);
	size_t c = __atomic_load_n(&t->committed, __ATOMIC_ACQUIRE);
	if (c > t->flushed)
		out_write_locked(t->buf + t->flushed, c - t->flushed);
	t->flushed = c;
	spin_unlock(&t->flock);
}

// ---------------------------------------------------------------------------
// The writer thread. Full buffers go to a FIFO that one thread writes out,
// so that the traced threads never wait for write(2) (the page-cache copy
// costs more than formatting). Per thread the order is kept: a thread's
// buffers enter the FIFO in order and one writer takes them in order.
// Without the writer (MEMTRACE_WRITER=0, a fork child, unbuffered mode)
// the owner writes its buffer itself.

#define QMAX 32

typedef struct { char *buf; size_t off, len; } qitem_t;

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;    // items queued
static pthread_cond_t q_space = PTHREAD_COND_INITIALIZER; // an item written
static qitem_t q_items[QMAX];
static int q_head, q_n, q_writing;
static char *q_pool[QMAX + 4];
static int q_npool;
static volatile int writer_on;
static size_t buf_cap;            // bytes per buffer (a multiple of the page)

static char *buf_get_locked(void)
{
	if (q_npool > 0)
		return q_pool[--q_npool];
	return raw_map(buf_cap);
}

static void buf_put_locked(char *b)
{
	if (q_npool < (int)(sizeof q_pool / sizeof q_pool[0]))
		q_pool[q_npool++] = b;
	else
		raw_unmap(b, buf_cap);
}

static void *writer_main(void *arg)
{
	t_in = 1; // nothing this thread does is the program's
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&q_mu);
	for (;;) {
		while (q_n == 0)
			pthread_cond_wait(&q_cv, &q_mu);
		qitem_t it = q_items[q_head];
		q_head = (q_head + 1) % QMAX;
		q_n--;
		q_writing = 1;
		pthread_mutex_unlock(&q_mu);
		pthread_mutex_lock(&write_mu);
		out_write(it.buf + it.off, it.len);
		pthread_mutex_unlock(&write_mu);
		pthread_mutex_lock(&q_mu);
		q_writing = 0;
		buf_put_locked(it.buf);
		pthread_cond_broadcast(&q_space);
	}
	return arg;
}

// q_drain writes everything queued, in order, from the calling thread:
// at exit, exec, _exit and fork nothing may stay behind in the FIFO.
static void q_drain_locked(void)
{
	while (q_writing)
		pthread_cond_wait(&q_space, &q_mu);
	while (q_n > 0) {
		qitem_t it = q_items[q_head];
		q_head = (q_head + 1) % QMAX;
		q_n--;
		out_write_locked(it.buf + it.off, it.len);
		buf_put_locked(it.buf);
	}
}

static void q_drain(void)
{
	if (!writer_on)
		return;
	pthread_mutex_lock(&q_mu);
	q_drain_locked();
	pthread_mutex_unlock(&q_mu);
}

// owner_flush empties the owner's buffer so it can start again at 0. With
// final, the thread is ending: the buffer is handed over for good.
static void owner_flush(tstate *t, int final)
{
	spin_lock(&t->flock);
	size_t from = t->flushed, to = t->pos;
	if (writer_on && !g_exiting) {
		pthread_mutex_lock(&q_mu);
		while (q_n == QMAX)
			pthread_cond_wait(&q_space, &q_mu);
		char *nb = final ? NULL : buf_get_locked();
		if (to > from && (final || nb)) {
			q_items[(q_head + q_n) % QMAX] = (qitem_t){t->buf, from, to - from};
			q_n++;
			pthread_cond_signal(&q_cv);
			t->buf = nb;
		} else {
			if (nb)
				buf_put_locked(nb);
			if (final) {
				buf_put_locked(t->buf);
				t->buf = NULL;
			}
			pthread_mutex_unlock(&q_mu);
			if (to > from && t->buf)
				out_write_locked(t->buf + from, to - from);
			pthread_mutex_lock(&q_mu);
		}
		pthread_mutex_unlock(&q_mu);
	} else {
		if (to > from)
			out_write_locked(t->buf + from, to - from);
		if (final) {
			raw_unmap(t->buf, buf_cap);
			t->buf = NULL;
		}
	}
	t->pos = 0;
	t->flushed = 0;
	__atomic_store_n(&t->committed, 0, __ATOMIC_RELEASE);
	spin_unlock(&t->flock);
}

static void writer_start(void)
{
	// MEMTRACE_WRITER=0 keeps the program's thread list untouched.
	const char *w = getenv("MEMTRACE_WRITER");
	if (unbuffered || (w && strcmp(w, "0") == 0))
		return;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 << 10);
	pthread_t th;
	writer_on = 1;
	if (pthread_create(&th, &at, writer_main, NULL) != 0)
		writer_on = 0;
	else
		pthread_setname_np(th, "memtrace-wr");
	pthread_attr_destroy(&at);
}

static size_t record_reserve(void)
{
	return LINE_MAX_EV + (size_t)stack_depth * FRAME_MAX + 64;
}

static tstate *state_new(void)
{
	size_t reserve = record_reserve();
	size_t len = (sizeof(tstate) + 4095) & ~(size_t)4095;
	tstate *t = raw_map(len);
	if (!t)
		return NULL;
	pthread_mutex_lock(&q_mu);
	t->buf = buf_get_locked();
	pthread_mutex_unlock(&q_mu);
	if (!t->buf) {
		raw_unmap(t, len);
		return NULL;
	}
	t->map_len = len;
	t->cap = buf_cap;
	t->limit = buf_cap - reserve;
	t->tid = gettid_raw();
	refresh_name(t);
	spin_lock(&reg_lock);
	t->next = reg_head;
	reg_head = t;
	spin_unlock(&reg_lock);
	return t;
}

static tstate *thread_init(void)
{
	tstate *t = state_new();
	if (!t)
		return NULL;
	t_state = t;
	// The key's destructor writes the EXIT line when the thread ends.
	pthread_setspecific(exit_key, t);
	return t;
}

static inline tstate *cur_state(void)
{
	tstate *t = t_state;
	if (UNLIKELY(!t))
		t = thread_init();
	return t;
}

// A record is being formatted at t->buf+t->pos; commit makes it visible to
// other flushers and flushes when the buffer is full or unbuffered.
static inline void commit(tstate *t, char *end)
{
	t->pos = (size_t)(end - t->buf);
	__atomic_store_n(&t->committed, t->pos, __ATOMIC_RELEASE);
	if (UNLIKELY(t->pos >= t->limit || unbuffered || g_exiting)) {
		owner_flush(t, 0);
		// Re-read the name at the next event: a rename through
		// /proc/self/task/N/comm has no hook.
		t->gen--;
	}
}

static inline char *rec_begin(tstate *t)
{
	return t->buf + t->pos;
}

static char *put_frames(tstate *t, char *o);

static inline char *fmt_head(tstate *t, char *o, int op, uint64_t ts)
{
	// Fixed-size copies (the record has slack past its end) compile to a
	// few vector moves; variable ones become calls.
	memcpy(o, t->prefix, 64);
	o += t->plen;
	memcpy(o, op_col[op], 24);
	o += op_col_len[op];
	o = put_pad_u(o, ts, 12);
	*o++ = ' ';
	return o;
}

static void emit_alloc(tstate *t, int op, uint64_t size, const void *p)
{
	t->total += size;
	wguard_t g;
	if (unbuffered)
		wlock(&g);
	char *o = rec_begin(t);
	o = fmt_head(t, o, op, now_us());
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	o = PUT_LIT(o, "  total=");
	o = put_pad_u(o, t->total, 12);
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	if (t->stacks)
		o = put_frames(t, o);
	if (unbuffered) {
		out_write(t->buf, (size_t)(o - t->buf));
		wunlock(&g);
		return;
	}
	commit(t, o);
}

static void emit_free(tstate *t, int op, uint64_t size, const void *p, uint64_t ts)
{
	wguard_t g;
	if (unbuffered) {
		wlock(&g);
		ts = now_us();
	}
	char *o = rec_begin(t);
	o = fmt_head(t, o, op, ts);
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	if (t->stacks)
		o = put_frames(t, o);
	if (unbuffered) {
		out_write(t->buf, (size_t)(o - t->buf));
		wunlock(&g);
		return;
	}
	commit(t, o);
}

static char *fmt_exit(tstate *t, char *o, uint64_t ts)
{
	o = fmt_head(t, o, OP_EXIT, ts);
	o = PUT_LIT(o, "total=");
	o = put_pad_u(o, t->total, 12);
	o = PUT_LIT(o, " bytes allocated\n");
	return o;
}

// Meta lines ("[memtrace] WORD k=v"): values are quoted as Go's
// strconv.Quote would read them back when they hold odd bytes.
static char *put_meta_val(char *o, char *end, const char *v)
{
	int q = !*v;
	for (const char *s = v; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c == '"' || c >= 0x7f || c == '\\')
			q = 1;
	}
	if (!q) {
		size_t n = strlen(v);
		if (n > (size_t)(end - o))
			n = (size_t)(end - o);
		return put_s(o, v, n);
	}
	*o++ = '"';
	for (const char *s = v; *s && end - o > 6; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c == '\n') {
			o = PUT_LIT(o, "\\n");
		} else if (c == '\t') {
			o = PUT_LIT(o, "\\t");
		} else if (c < ' ' || c >= 0x7f) {
			static const char hx[] = "0123456789abcdef";
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hx[c >> 4];
			*o++ = hx[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o++ = '"';
	return o;
}

// ---------------------------------------------------------------------------
// Stack frames, in glibc backtrace_symbols' layout with mangled names.

static char *put_frames(tstate *t, char *o)
{
	(void)t;
	void *pcs[128 + 16];
	int want = stack_depth + 16;
	if (want > (int)(sizeof pcs / sizeof pcs[0]))
		want = (int)(sizeof pcs / sizeof pcs[0]);
	int n = backtrace(pcs, want);
	int idx = 0;
	for (int i = 0; i < n && idx < stack_depth; i++) {
		Dl_info info;
		struct link_map *lm = NULL;
		uintptr_t a = (uintptr_t)pcs[i];
		int ok = dladdr1(pcs[i], &info, (void **)&lm, RTLD_DL_LINKMAP);
		if (ok && (uintptr_t)info.dli_fbase == self_base)
			continue; // our own frames
		char *line = o;
		o = PUT_LIT(o, "[memtrack]   #");
		char *s = o;
		o = put_u(o, (uint64_t)idx);
		while (o - s < 2)
			*o++ = ' ';
		*o++ = ' ';
		if (ok && info.dli_fname && info.dli_fname[0]) {
			size_t room = FRAME_MAX - 64;
			size_t fl = strlen(info.dli_fname);
			if (fl > room / 2)
				fl = room / 2;
			for (size_t k = 0; k < fl; k++) {
				char c = info.dli_fname[k];
				*o++ = (c == '\n' || c == '\r') ? '?' : c;
			}
			*o++ = '(';
			uintptr_t off;
			if (info.dli_sname && info.dli_saddr) {
				size_t sl = strlen(info.dli_sname);
				size_t left = FRAME_MAX - 64 - (size_t)(o - line);
				if (sl > left)
					sl = left; // cut: the line must fit the record
				for (size_t k = 0; k < sl; k++) {
					char c = info.dli_sname[k];
					*o++ = (c == '\n' || c == '\r') ? '?' : c;
				}
				off = a - (uintptr_t)info.dli_saddr;
			} else {
				off = a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)info.dli_fbase);
			}
			o = PUT_LIT(o, "+0x");
			o = put_hex(o, off);
			o = PUT_LIT(o, ") ");
		}
		o = PUT_LIT(o, "[0x");
		o = put_hex(o, a);
		o = PUT_LIT(o, "]\n");
		idx++;
	}
	return o;
}

// ---------------------------------------------------------------------------
// Early events: calls made before the constructor has run (constructors of
// libraries initialised before this one, such as libstdc++'s 72 KiB
// exception pool) are kept here and replayed, in order, once the output is
// set up. Static memory only, no lock: a slot is claimed with an atomic add
// and published with a release store, so a second thread that a constructor
// started is safe too. A free claims its slot before the real call (so that
// a block reused by another thread comes after it) and fills it afterwards;
// a call that failed leaves its slot void. The constructor closes the
// buffer; calls that find it full or closed go the ordinary way.

#define EARLY_CAP 256
#define EARLY_CLOSED 0x40000000u

enum { E_EMPTY, E_FILLED, E_VOID };

typedef struct {
	uint64_t ptr, size, kind;
	int op, state;
} early_t;

static early_t early_ev[EARLY_CAP];
static uint32_t early_n;

static inline int early_open(void)
{
	return __atomic_load_n(&early_n, __ATOMIC_RELAXED) < EARLY_CAP;
}

static int early_claim(void)
{
	if (!early_open())
		return -1;
	uint32_t i = __atomic_fetch_add(&early_n, 1, __ATOMIC_ACQ_REL);
	return i < EARLY_CAP ? (int)i : -1;
}

// early_fill publishes slot i; op < 0 voids it.
static void early_fill(int i, int op, const void *p, uint64_t size, uint64_t kind)
{
	if (i < 0)
		return;
	early_t *e = &early_ev[i];
	e->op = op;
	e->ptr = (uint64_t)(uintptr_t)p;
	e->size = size;
	e->kind = kind;
	__atomic_store_n(&e->state, op < 0 ? E_VOID : E_FILLED, __ATOMIC_RELEASE);
}

// early_push records a completed call; 0 when the buffer took nothing.
static int early_push(int op, const void *p, uint64_t size, uint64_t kind)
{
	int i = early_claim();
	early_fill(i, op, p, size, kind);
	return i >= 0;
}

// ---------------------------------------------------------------------------
// Events. Each hook calls one of these with t_in set.

static inline int want_log(tstate **tp)
{
	if (UNLIKELY(!g_ready || g_off || out_dead))
		return 0;
	tstate *t = cur_state();
	if (UNLIKELY(t == NULL || t == T_EXITED))
		return 0;
	if (UNLIKELY(t->gen != name_gen))
		refresh_name(t);
	*tp = t;
	return t->tracked;
}

static void slow_event(int op, uint64_t size, const void *p, int is_free);

static inline __attribute__((always_inline)) void bin_event(int op, uint64_t ts, const void *p, uint64_t size);
static inline uint64_t bin_now(void);
static inline uint64_t bin_ts(void);

static inline void on_alloc(int op, uint64_t size, const void *p, uint64_t kind)
{
	if (g_bin) {
		bin_event(op, bin_ts(), p, size);
		return;
	}
	// Before the constructor g_bin is not known yet: every early call
	// comes here, whichever mode the constructor then picks.
	if (UNLIKELY(!g_ready) && early_push(op, p, size, kind))
		return;
	tstate *t = NULL;
	int log = want_log(&t) && size >= min_size;
	tbl_put(p, (size << 2) | kind | (log ? V_LOGGED : 0));
	if (!log) {
		if (UNLIKELY(t_state == T_EXITED && g_ready && !g_off && size >= min_size))
			slow_event(op, size, p, 0);
		return;
	}
	if (UNLIKELY(g_exiting)) {
		slow_event(op, size, p, 0);
		return;
	}
	emit_alloc(t, op, size, p);
}

// before_free takes p's entry out of the table before the real free runs, so
// that another thread that gets the same address cannot lose its entry.
// It returns 1 when the free must be logged, with its size.
static inline int before_free(const void *p, uint64_t *size, int want_mmap)
{
	uint64_t v;
	int found = tbl_take(p, &v);
	if (want_mmap && (!found || !(v & V_MMAP))) {
		if (found)
			tbl_put(p, v);
		return -1; // not a mapping we track: not ours to log
	}
	*size = found ? v >> 2 : 0;
	if (found)
		return (v & V_LOGGED) ? 1 : 0;
	return min_size == 0;
}

static inline void on_free(int op, uint64_t size, const void *p, uint64_t ts)
{
	tstate *t = NULL;
	if (!want_log(&t)) {
		if (UNLIKELY(t_state == T_EXITED && g_ready && !g_off))
			slow_event(op, size, p, 1);
		return;
	}
	if (UNLIKELY(g_exiting)) {
		slow_event(op, size, p, 1);
		return;
	}
	emit_free(t, op, size, p, ts);
}

// slow_event logs for a thread whose state is gone (allocations made by TLS
// destructors after our EXIT line) or while the process exits: straight to
// the output under the write lock.
static void slow_event(int op, uint64_t size, const void *p, int is_free)
{
	tstate tmp;
	memset(&tmp, 0, sizeof tmp);
	tstate *t = t_state;
	if (t == NULL || t == T_EXITED) {
		tmp.tid = gettid_raw();
		refresh_name(&tmp);
		t = &tmp;
	}
	if (!t->tracked)
		return;
	char line[LINE_MAX_EV];
	char *o = fmt_head(t, line, op, now_us());
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	if (!is_free) {
		t->total += size;
		o = PUT_LIT(o, "  total=");
		o = put_pad_u(o, t->total, 12);
	}
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	out_write_locked(line, (size_t)(o - line));
}

static inline uint64_t free_ts(void)
{
	// Unbuffered mode re-reads the clock under the write lock.
	return (g_ready && !unbuffered) ? now_us() : 0;
}

// ---------------------------------------------------------------------------
// Thread and process lifecycle.

static void write_exit_of(tstate *t)
{
	char line[LINE_MAX_EV];
	char *o = fmt_exit(t, line, now_us());
	out_write_locked(line, (size_t)(o - line));
}

static void thread_exit(void *arg)
{
	tstate *t = arg;
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off && t->tracked) {
		if (t->gen != name_gen)
			refresh_name(t);
		char *o = fmt_exit(t, rec_begin(t), now_us());
		t->pos = (size_t)(o - t->buf);
		__atomic_store_n(&t->committed, t->pos, __ATOMIC_RELEASE);
	}
	t_state = T_EXITED;
	owner_flush(t, 1);
	spin_lock(&reg_lock);
	for (tstate **pp = &reg_head; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	spin_unlock(&reg_lock);
	raw_unmap(t, t->map_len);
	t_in = in;
}

// flush_all writes every thread's committed records; with exits, the EXIT
// line of every live thread follows its records (process exit).
static void flush_all(int exits)
{
	q_drain();
	spin_lock(&reg_lock);
	for (tstate *t = reg_head; t; t = t->next) {
		flush_state(t);
		if (exits && g_ready && !g_off && t->tracked)
			write_exit_of(t);
	}
	spin_unlock(&reg_lock);
}

static void bin_process_exit(void);

static void process_exit(void)
{
	if (g_bin) {
		bin_process_exit();
		return;
	}
	if (g_exiting)
		return;
	int in = t_in;
	t_in = 1;
	// Later frees (libc's own teardown) are written one by one.
	g_exiting = 1;
	flush_all(1);
	t_in = in;
}

__attribute__((destructor)) static void fini(void)
{
	process_exit();
}

static void put_meta_line(tstate *t, const char *word, const char *kvs)
{
	// kvs is already formatted "k=v k=v".
	char line[512];
	char *o = PUT_LIT(line, "[memtrace] ");
	o = put_s(o, word, strlen(word));
	if (kvs[0]) {
		*o++ = ' ';
		size_t n = strlen(kvs);
		if (n > sizeof line - 64)
			n = sizeof line - 64;
		o = put_s(o, kvs, n);
	}
	*o++ = '\n';
	if (t && t != T_EXITED && !unbuffered && !g_exiting) {
		memcpy(rec_begin(t), line, (size_t)(o - line));
		commit(t, rec_begin(t) + (o - line));
	} else {
		out_write_locked(line, (size_t)(o - line));
	}
}

static char *kv_u(char *o, const char *k, uint64_t v)
{
	o = put_s(o, k, strlen(k));
	*o++ = '=';
	o = put_u(o, v);
	*o++ = ' ';
	return o;
}

static void read_comm(char *nm)
{
	memset(nm, 0, 17);
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, nm, 16);
		close(fd);
		if (n > 0 && nm[n - 1] == '\n')
			nm[n - 1] = 0;
	}
}

static pid_t fork_parent;

static void atfork_prepare(void)
{
	int in = t_in;
	t_in = 1;
	tstate *t = t_state;
	if (t && t != T_EXITED)
		owner_flush(t, 0);
	// Take every lock so that the child inherits none held by a thread
	// that does not exist there; the FIFO is written out first, since the
	// writer thread does not exist there either.
	spin_lock(&reg_lock);
	if (writer_on) {
		pthread_mutex_lock(&q_mu);
		q_drain_locked();
	}
	for (int i = 0; i < NSHARD; i++)
		spin_lock(&shards[i].lock);
	pthread_mutex_lock(&write_mu);
	fork_parent = getpid();
	t_in = in;
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&write_mu);
	if (writer_on)
		pthread_mutex_unlock(&q_mu);
	for (int i = 0; i < NSHARD; i++)
		spin_unlock(&shards[i].lock);
	spin_unlock(&reg_lock);
}

static void atfork_child(void)
{
	int in = t_in;
	t_in = 1;
	pthread_mutex_init(&write_mu, NULL);
	pthread_mutex_init(&q_mu, NULL);
	pthread_cond_init(&q_cv, NULL);
	pthread_cond_init(&q_space, NULL);
	q_writing = 0;
	writer_on = 0; // the writer thread stayed in the parent
	for (int i = 0; i < NSHARD; i++)
		spin_unlock(&shards[i].lock);
	// The other threads do not exist here: forget their states (their
	// records were or will be written by the parent).
	tstate *self = t_state;
	tstate *t = reg_head;
	reg_head = NULL;
	while (t) {
		tstate *next = t->next;
		if (t == self) {
			t->next = NULL;
			reg_head = t;
		} else {
			raw_unmap(t->buf, buf_cap);
			raw_unmap(t, t->map_len);
		}
		t = next;
	}
	spin_unlock(&reg_lock);
	g_pid = getpid();
	if (!follow) {
		g_off = 1;
		t_in = in;
		return;
	}
	if (self && self != T_EXITED) {
		self->tid = gettid_raw();
		self->total = 0;
		self->pos = self->flushed = self->committed = 0;
		spin_unlock(&self->flock);
		refresh_name(self);
		build_prefix(self);
	}
	if (g_ready && !g_off) {
		char kv[256], *o = kv;
		o = PUT_LIT(o, "event=fork ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = kv_u(o, "ppid", (uint64_t)fork_parent);
		o = kv_u(o, "ts", now_us());
		o[-1] = 0;
		put_meta_line(self, "proc", kv);
	}
	t_in = in;
}

static void read_cmdline(char *dst, size_t n);
static void err_line(const char *a, const char *b);

// ---------------------------------------------------------------------------
// Binary mode (memtrace --preload): compact 32-byte records appended to
// per-thread chunks of a shared-memory region that the memtrace process
// (package preload, shm.go) created, maps too, and turns into the text log.
// No syscall, no lock and no size table per event: the consumer keeps the
// ptr->size map, filters by size and thread name, and formats with logfmt.
// The layout here must match shm.go (see the constants there).
//
// Lock-free on purpose: a traced process may fork or be SIGKILLed at any
// instant, and no lock of the region may ever be held by a dead process.

#define SHM_ENV "MEMTRACE_SHM"
#define SHM_MAGIC 0x4853544du
#define SHM_VERSION 2u
#define CH_FREE 2u
#define CH_OWNED 1u
// Record ops beyond the allocation ops (OP_*): see shm.go.
#define R_NAME 32
#define R_START 33
#define R_EXEC 34
#define R_FORK 35
#define R_PEXIT 36

typedef struct {
	uint32_t magic, version, chunk_size, nchunks;
	uint32_t hw, nfree, clock_state, clock_kind;
	uint64_t epoch_ns, cnt0, mono0, mult;
	uint32_t lost, beat, stream_next, gone;
	uint32_t data_off, pad_[11];
	// stop: memtrace detached (Ctrl-C) or finished; alone on its cache
	// line, which nobody writes again once it is set.
	uint32_t stop;
} shm_hdr;

typedef struct {
	uint32_t committed, sealed, pid, tid, stream, seq;
	uint32_t pad_[10];
} chunk_hdr; // 64 bytes, records follow

typedef struct {
	uint64_t ts, ptr, size, meta; // meta: op | nslots<<16 | aux<<32
} brec;

typedef struct {
	chunk_hdr *ch;
	brec *recs;
	uint32_t n, cap;
	uint32_t fast;      // records below this index take the fast path
	uint32_t stream, seq;
	uint32_t lost;      // dropped, not yet added to the header
	unsigned gen;
	int stacks, keyed;
	pid_t tid;
	uint64_t retry_at;  // while dropping: next time a chunk is tried
	char name[16];
} bstate;

static shm_hdr *shm;
static uint32_t *shm_state;
static char *shm_data;
static size_t shm_len;
static int shm_clock_kind;
static volatile int consumer_lost; // waited in vain once: never wait again
static __thread bstate tb __attribute__((tls_model("initial-exec")));
// Per thread: two threads may fork at once; each child is a copy of its
// forking thread and takes that thread's values.
static __thread uint64_t fork_ts __attribute__((tls_model("initial-exec")));
static __thread uint32_t fork_serial __attribute__((tls_model("initial-exec"))); // the child's stream, taken before fork_ts

static inline uint64_t bin_now(void)
{
	if (LIKELY(shm_clock_kind == 1))
		return read_counter();
	return mono_ns();
}

static uint64_t bin_now_ns(void)
{
	// The region's clock in ns since the epoch, for the library's own use.
	uint64_t r = bin_now();
	if (shm_clock_kind == 1) {
		uint64_t d = r - shm->cnt0;
		uint64_t hi = (d >> 32) * shm->mult, lo = ((d & 0xffffffffu) * shm->mult) >> 32;
		return shm->mono0 + hi + lo - shm->epoch_ns;
	}
	return r - shm->epoch_ns;
}

static void bin_publish_lost(void)
{
	if (tb.lost) {
		__atomic_add_fetch(&shm->lost, tb.lost, __ATOMIC_RELAXED);
		tb.lost = 0;
	}
}

static void bin_seal(void)
{
	if (tb.ch) {
		__atomic_store_n(&tb.ch->sealed, 1, __ATOMIC_RELEASE);
		tb.ch = NULL;
		tb.recs = NULL;
		tb.n = tb.cap = tb.fast = 0;
	}
}

// bin_stopped says whether memtrace has stopped reading the region (it
// detached on Ctrl-C, or finished). The process then stops tracing for
// good and its hooks only pass calls through: g_off makes every slow path
// return at once, and the new name generation sends every thread's next
// event to the slow path. Checked out of line only (a new chunk, a rename,
// a thread's start), so a thread writes at most the rest of its chunk,
// which nobody reads, before it notices.
static int bin_stopped(void)
{
	if (!__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE))
		return 0;
	if (!g_off) {
		g_off = 1;
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	}
	return 1;
}

static int bin_try_claim(uint32_t *idx)
{
	uint32_t nch = shm->nchunks;
	if (__atomic_load_n(&shm->nfree, __ATOMIC_ACQUIRE) > 0) {
		// Chunks the consumer has emptied: reuse them before touching
		// new pages. The scan is rare (once per chunk's worth of records).
		uint32_t hw = __atomic_load_n(&shm->hw, __ATOMIC_ACQUIRE);
		if (hw > nch)
			hw = nch;
		uint32_t start = (uint32_t)tb.tid % (hw ? hw : 1);
		for (uint32_t k = 0; k < hw; k++) {
			uint32_t i = (start + k) % hw;
			uint32_t want = CH_FREE;
			if (__atomic_load_n(&shm_state[i], __ATOMIC_RELAXED) == CH_FREE &&
			    __atomic_compare_exchange_n(&shm_state[i], &want, CH_OWNED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				__atomic_sub_fetch(&shm->nfree, 1, __ATOMIC_RELAXED);
				*idx = i;
				return 1;
			}
		}
	}
	uint32_t hw = __atomic_load_n(&shm->hw, __ATOMIC_RELAXED);
	while (hw < nch) {
		if (__atomic_compare_exchange_n(&shm->hw, &hw, hw + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&shm_state[hw], CH_OWNED, __ATOMIC_RELEASE);
			// Fault the fresh chunk's pages in one call rather than
			// one fault per 128 records (EINVAL before Linux 5.14).
			madvise(shm_data + (size_t)hw * shm->chunk_size, shm->chunk_size, 23 /* MADV_POPULATE_WRITE */);
			*idx = hw;
			return 1;
		}
	}
	return 0;
}

// bin_claim gives the thread a fresh chunk. With the region full it waits
// for the consumer (so that a burst is slowed down, not lost) while the
// consumer shows signs of life:
//   - no heartbeat for 1 s: memtrace is gone (killed, or it finished while
//     this process lives on): never wait again, drop and count;
//   - 2 s without a free chunk although the consumer lives (the region is
//     held by live threads that write little): drop and count, and do not
//     wait again for 1 s.
static int bin_claim(void)
{
	static uint64_t nowait_until;
	uint32_t idx;
	int ok = bin_try_claim(&idx);
	if (!ok && !consumer_lost && !__atomic_load_n(&shm->gone, __ATOMIC_ACQUIRE) &&
	    bin_now_ns() >= __atomic_load_n(&nowait_until, __ATOMIC_RELAXED)) {
		uint32_t beat = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
		int still = 0, waited = 0;
		while (!ok && still < 2000 && waited++ < 4000 && !__atomic_load_n(&shm->gone, __ATOMIC_ACQUIRE) &&
		       !__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE)) {
			struct timespec ts = {0, 500000};
			nanosleep(&ts, NULL);
			ok = bin_try_claim(&idx);
			uint32_t b = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
			still = b == beat ? still + 1 : 0;
			beat = b;
		}
		if (!ok && still >= 2000)
			consumer_lost = 1;
		else if (!ok)
			__atomic_store_n(&nowait_until, bin_now_ns() + 1000000000ull, __ATOMIC_RELAXED);
	}
	if (!ok)
		return 0;
	chunk_hdr *c = (chunk_hdr *)(shm_data + (size_t)idx * shm->chunk_size);
	c->committed = 0;
	c->sealed = 0;
	c->pid = (uint32_t)g_pid;
	c->tid = (uint32_t)tb.tid;
	c->seq = tb.seq++;
	// stream last: the consumer reads a chunk only once it is set.
	__atomic_store_n(&c->stream, tb.stream, __ATOMIC_RELEASE);
	tb.ch = c;
	tb.recs = (brec *)(c + 1);
	tb.n = 0;
	tb.cap = (shm->chunk_size - (uint32_t)sizeof(chunk_hdr)) / (uint32_t)sizeof(brec);
	return 1;
}

static inline void bin_commit(uint32_t n)
{
	tb.n = n;
	__atomic_store_n(&tb.ch->committed, n, __ATOMIC_RELEASE);
}

static void bin_thread_exit(void *arg);

// bin_refresh_name writes a NAME record stamped ts: the time of the event
// it comes before, so that a stream's times never go back.
static void bin_refresh_name(uint64_t ts)
{
	char nm[17] = {0};
	tb.gen = __atomic_load_n(&name_gen, __ATOMIC_RELAXED);
	if (syscall(SYS_prctl, PR_GET_NAME, nm, 0, 0, 0) != 0)
		nm[0] = 0;
	nm[15] = 0;
	tb.stacks = stack_depth > 0 && name_matches(nm, stack_threads);
	tb.fast = (tb.ch && !tb.stacks && tb.cap > 2) ? tb.cap - 2 : 0;
	if (tb.ch && tb.n > 0 && memcmp(nm, tb.name, 16) == 0)
		return;
	memcpy(tb.name, nm, 16);
	if (tb.ch && tb.n < tb.cap) {
		brec *r = &tb.recs[tb.n];
		r->ts = ts;
		memcpy(&r->ptr, nm, 16); // ptr and size hold the 16 name bytes
		r->meta = R_NAME;
		bin_commit(tb.n + 1);
	}
}

// bin_new_stream gives the thread its stream serial. It runs before the
// thread's first timestamp is read, so that the consumer, which knows how
// many serials exist when it starts a pass, can tell which records may
// still come with older times (see converter.watermark).
static void bin_new_stream(void)
{
	tb.tid = gettid_raw();
	tb.stream = fork_serial ? fork_serial : __atomic_add_fetch(&shm->stream_next, 1, __ATOMIC_SEQ_CST);
	fork_serial = 0;
	tb.seq = 0;
	tb.gen = name_gen - 1;
	if (!tb.keyed) {
		// The key's destructor writes the thread's EXIT record.
		tb.keyed = 1;
		pthread_setspecific(exit_key, &tb);
	}
#if defined(__x86_64__)
	__asm__ __volatile__("lfence" ::: "memory"); // rdtsc after the serial
#endif
}

static inline uint64_t bin_ts(void)
{
	if (UNLIKELY(!tb.stream) && g_ready && !g_off)
		bin_new_stream();
	return bin_now();
}

// bin_room makes room for a record of 1+extra slots: a new stream on the
// thread's first event, a new chunk when this one is full, the name when it
// changed. 0 means drop (the region is full and the consumer gone).
static int bin_room(uint32_t extra, uint64_t ts)
{
	if (UNLIKELY(!tb.stream))
		bin_new_stream();
	if (tb.ch && tb.n + 2 + extra <= tb.cap) {
		if (UNLIKELY(tb.gen != name_gen))
			bin_refresh_name(ts);
		return 1;
	}
	if (!tb.ch && tb.retry_at && bin_now_ns() < tb.retry_at)
		return 0;
	bin_seal();
	if (!bin_claim()) {
		tb.retry_at = bin_now_ns() + 10000000; // try again in 10 ms
		return 0;
	}
	tb.retry_at = 0;
	bin_publish_lost();
	// A new chunk re-reads the name: a rename through /proc has no hook.
	tb.gen = name_gen - 1;
	bin_refresh_name(ts);
	return tb.n + 1 + extra <= tb.cap;
}

static uint32_t frame_slots(void)
{
	return (uint32_t)((8 + (size_t)stack_depth * (24 + 256 + 600) + 31) / 32);
}

static uint32_t bin_frames(char *blob);

static void bin_event_slow(int op, uint64_t ts, const void *p, uint64_t size);

// bin_event is the hot path: four stores and a release store of the count,
// into memory the consumer reads; everything else is bin_event_slow.
static inline __attribute__((always_inline)) void bin_event(int op, uint64_t ts, const void *p, uint64_t size)
{
	uint32_t n = tb.n;
	if (LIKELY(n < tb.fast && tb.gen == name_gen)) {
		brec *r = &tb.recs[n];
		r->ts = ts;
		r->ptr = (uint64_t)(uintptr_t)p;
		r->size = size;
		r->meta = (uint64_t)op;
		tb.n = n + 1;
		__atomic_store_n(&tb.ch->committed, n + 1, __ATOMIC_RELEASE);
		return;
	}
	bin_event_slow(op, ts, p, size);
}

static void bin_event_slow(int op, uint64_t ts, const void *p, uint64_t size)
{
	if (UNLIKELY(!g_ready || g_off || bin_stopped()))
		return;
	{
		uint32_t extra = stack_depth ? frame_slots() : 0;
		if (!bin_room(extra, ts)) {
			tb.lost++;
			return;
		}
		if (tb.stacks) {
			brec *r = &tb.recs[tb.n];
			uint32_t ns = bin_frames((char *)(r + 1));
			r->ts = ts;
			r->ptr = (uint64_t)(uintptr_t)p;
			r->size = size;
			r->meta = (uint64_t)op | ((uint64_t)ns << 16);
			bin_commit(tb.n + 1 + ns);
			return;
		}
	}
	brec *r = &tb.recs[tb.n];
	r->ts = ts;
	r->ptr = (uint64_t)(uintptr_t)p;
	r->size = size;
	r->meta = (uint64_t)op;
	bin_commit(tb.n + 1);
}

// bin_blob writes a record followed by n bytes of data (strings of the
// header and exec records).
static void bin_blob(int op, uint64_t ptr, uint64_t size, const char *data, size_t n, uint64_t ts)
{
	uint32_t ns = (uint32_t)((n + 31) / 32);
	if (bin_stopped())
		return;
	if (!ts)
		ts = bin_ts();
	if (!bin_room(ns, ts)) {
		tb.lost++;
		return;
	}
	brec *r = &tb.recs[tb.n];
	memcpy(r + 1, data, n);
	r->ts = ts;
	r->ptr = ptr;
	r->size = size;
	r->meta = (uint64_t)op | ((uint64_t)ns << 16) | ((uint64_t)n << 32);
	bin_commit(tb.n + 1 + ns);
}

static void bin_thread_exit(void *arg)
{
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off)
		bin_blob(OP_EXIT, 0, 0, NULL, 0, 0);
	bin_publish_lost();
	// The chunk stays the thread's: frees made by later TLS destructors
	// still go there. The consumer frees it once the thread is gone.
	t_in = in;
	(void)arg;
}

static void bin_process_exit(void)
{
	if (g_exiting)
		return;
	g_exiting = 1;
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off)
		bin_blob(R_PEXIT, (uint64_t)g_pid, 0, NULL, 0, 0);
	bin_publish_lost();
	t_in = in;
}

// Frames: u32 count, then per frame u64 addr, u64 off, u16 module length
// (0xffff: no module), u16 symbol length, module bytes, symbol bytes.
static uint32_t bin_frames(char *blob)
{
	void *pcs[128 + 16];
	int want = stack_depth + 16;
	if (want > (int)(sizeof pcs / sizeof pcs[0]))
		want = (int)(sizeof pcs / sizeof pcs[0]);
	int n = backtrace(pcs, want);
	char *o = blob + 4;
	uint32_t count = 0;
	for (int i = 0; i < n && (int)count < stack_depth; i++) {
		Dl_info info;
		struct link_map *lm = NULL;
		uintptr_t a = (uintptr_t)pcs[i];
		int ok = dladdr1(pcs[i], &info, (void **)&lm, RTLD_DL_LINKMAP);
		if (ok && (uintptr_t)info.dli_fbase == self_base)
			continue; // our own frames
		uint64_t addr = a, off = 0;
		uint16_t ml = 0xffff, sl = 0;
		const char *mod = NULL, *sy = NULL;
		if (ok && info.dli_fname && info.dli_fname[0]) {
			mod = info.dli_fname;
			size_t l = strlen(mod);
			ml = (uint16_t)(l > 256 ? 256 : l);
			if (info.dli_sname && info.dli_saddr) {
				sy = info.dli_sname;
				l = strlen(sy);
				sl = (uint16_t)(l > 600 ? 600 : l);
				off = a - (uintptr_t)info.dli_saddr;
			} else {
				off = a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)info.dli_fbase);
			}
		}
		memcpy(o, &addr, 8);
		memcpy(o + 8, &off, 8);
		memcpy(o + 16, &ml, 2);
		memcpy(o + 18, &sl, 2);
		o += 20;
		if (mod) {
			memcpy(o, mod, ml);
			o += ml;
		}
		if (sy) {
			memcpy(o, sy, sl);
			o += sl;
		}
		count++;
	}
	memcpy(blob, &count, 4);
	return (uint32_t)((size_t)(o - blob) + 31) / 32;
}

// bin_attach maps the region named by MEMTRACE_SHM ("fd:dev:ino", or "off"
// when the parent does not want children traced). 1: binary mode (g_off
// set when the region is not usable); 0: not asked for.
static int bin_attach(void)
{
	const char *s = getenv(SHM_ENV);
	if (!s)
		return 0;
	g_bin = 1;
	int fd;
	unsigned long long dev, ino;
	if (strcmp(s, "off") == 0 || sscanf(s, "%d:%llu:%llu", &fd, &dev, &ino) != 3) {
		g_off = 1;
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino) {
		// Closed or reused by the program: never map someone else's file.
		g_off = 1;
		return 1;
	}
	shm_hdr h;
	if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != SHM_MAGIC || h.version != SHM_VERSION) {
		err_line("MEMTRACE_SHM is not a memtrace region of this version: ", s);
		g_off = 1;
		return 1;
	}
	shm_len = (size_t)h.data_off + (size_t)h.chunk_size * h.nchunks;
	void *m = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err_line("cannot map the shared region (address space?): ", s);
		g_off = 1;
		return 1;
	}
	if (((volatile shm_hdr *)m)->stop) {
		// memtrace has detached or finished: this program runs
		// untraced, and so do the programs it execs.
		munmap(m, shm_len);
		close(fd);
		setenv(SHM_ENV, "off", 1);
		g_off = 1;
		return 1;
	}
	shm = m;
	shm_state = (uint32_t *)((char *)m + 4096);
	shm_data = (char *)m + h.data_off;
	if (fd < 900) {
		// Out of the way of the program's own descriptors, and open
		// across exec so that exec'd programs find the region.
		int hi = fcntl(fd, F_DUPFD, 900);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	char v[96];
	if (follow) {
		int fl = fcntl(fd, F_GETFD);
		fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
		snprintf(v, sizeof v, "%d:%llu:%llu", fd, dev, ino);
	} else {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		strcpy(v, "off");
	}
	setenv(SHM_ENV, v, 1);
	// The first process sets the time axis; the others share it.
	uint32_t zero = 0;
	if (__atomic_compare_exchange_n(&shm->clock_state, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		epoch_ns = mono_ns();
		clock_init(2);
		shm->epoch_ns = epoch_ns;
		shm->clock_kind = (uint32_t)use_counter;
		shm->cnt0 = cnt0;
		shm->mono0 = mono0;
		shm->mult = cnt_mult;
		__atomic_store_n(&shm->clock_state, 2, __ATOMIC_RELEASE);
	} else {
		for (int i = 0; i < 2000 && __atomic_load_n(&shm->clock_state, __ATOMIC_ACQUIRE) != 2; i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	shm_clock_kind = (int)shm->clock_kind;
	epoch_ns = shm->epoch_ns;
	return zero == 0 ? 1 : 2;
}

static void bin_start_record(int exec_child)
{
	char comm[17], cmd[1024], blob[1100];
	read_comm(comm);
	read_cmdline(cmd, sizeof cmd);
	size_t n = 0;
	if (!exec_child) {
		memcpy(blob, VERSION, sizeof VERSION);
		n = sizeof VERSION;
	}
	size_t cl = strlen(comm) + 1, dl = strlen(cmd) + 1;
	memcpy(blob + n, comm, cl);
	n += cl;
	memcpy(blob + n, cmd, dl);
	n += dl;
	if (exec_child) {
		bin_blob(R_EXEC, (uint64_t)g_pid, (uint64_t)getppid(), blob, n, 0);
	} else {
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		uint64_t real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
		bin_blob(R_START, (uint64_t)g_pid, real, blob, n, 0);
	}
}

static void bin_atfork_prepare(void)
{
	fork_serial = 0;
	if (g_ready && !g_off && follow)
		fork_serial = __atomic_add_fetch(&shm->stream_next, 1, __ATOMIC_SEQ_CST);
	fork_ts = bin_now();
	fork_parent = getpid();
	bin_publish_lost();
}

static void bin_atfork_parent(void)
{
	fork_serial = 0;
}

static void bin_atfork_child(void)
{
	int in = t_in;
	t_in = 1;
	g_pid = getpid();
	// The chunk is the parent's: the child starts its own stream.
	tb.ch = NULL;
	tb.recs = NULL;
	tb.n = tb.cap = tb.fast = 0;
	tb.stream = 0;
	tb.lost = 0;
	if (!follow) {
		g_off = 1;
	} else if (g_ready && !g_off) {
		tb.tid = gettid_raw();
		bin_new_stream();
		bin_blob(R_FORK, (uint64_t)g_pid, (uint64_t)fork_parent, NULL, 0, fork_ts);
	}
	t_in = in;
}

// ---------------------------------------------------------------------------
// Constructor: options, output, header.

static size_t parse_size(const char *s, size_t dflt)
{
	if (!s || !*s)
		return dflt;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return dflt;
	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	else if (*end == 'g' || *end == 'G')
		v <<= 30;
	return (size_t)v;
}

static void copy_env(char *dst, size_t n, const char *name)
{
	const char *v = getenv(name);
	dst[0] = 0;
	if (v) {
		strncpy(dst, v, n - 1);
		dst[n - 1] = 0;
	}
}

static void err_line(const char *a, const char *b)
{
	char line[512];
	snprintf(line, sizeof line, "memtrace-preload: %s%s\n", a, b);
	ssize_t r = write(2, line, strlen(line));
	(void)r;
}

// open_listen waits for one viewer on HOST:PORT (127.0.0.1 unless
// MEMTRACE_LISTEN names another address) and returns the connection.
static int open_listen(const char *port_s)
{
	char host[128] = "127.0.0.1";
	int port = atoi(port_s);
	const char *lis = getenv("MEMTRACE_LISTEN");
	if (lis && *lis) {
		const char *c = strrchr(lis, ':');
		if (c) {
			size_t hl = (size_t)(c - lis);
			if (hl >= sizeof host)
				hl = sizeof host - 1;
			memcpy(host, lis, hl);
			host[hl] = 0;
			if (c[1])
				port = atoi(c + 1);
		} else {
			strncpy(host, lis, sizeof host - 1);
		}
		if (host[0] == '[') { // [::1]
			memmove(host, host + 1, strlen(host));
			char *rb = strchr(host, ']');
			if (rb)
				*rb = 0;
		}
		if (!host[0])
			strcpy(host, "0.0.0.0");
	}
	if (port <= 0 || port > 65535) {
		err_line("bad MEMTRACK_PORT: ", port_s);
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		sl = sizeof *a4;
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		sl = sizeof *a6;
	} else {
		err_line("MEMTRACE_LISTEN needs a numeric address, got: ", host);
		return -1;
	}
	int ls = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0)
		return -1;
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&ss, sl) < 0 || listen(ls, 1) < 0) {
		err_line("cannot listen on the address (in use?): ", host);
		close(ls);
		return -1;
	}
	char msg[200];
	snprintf(msg, sizeof msg, "[memtrace] notice msg=\"waiting for a viewer on %s:%d\"\n", host, port);
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
	int c;
	do {
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	} while (c < 0 && errno == EINTR);
	close(ls);
	return c;
}

// The session variable lets exec'd children append to the same output
// with the same time axis: "fd:dev:ino:epoch_ns:follow".
#define SESSION_ENV "MEMTRACE_PRELOAD_SESSION"

static int join_session(void)
{
	const char *s = getenv(SESSION_ENV);
	if (!s)
		return 0;
	int fd;
	unsigned long long dev, ino, ep;
	int fl;
	unsigned long long mult = 0;
	if (sscanf(s, "%d:%llu:%llu:%llu:%d:%llu", &fd, &dev, &ino, &ep, &fl, &mult) < 5)
		return 0;
	inherited_mult = mult;
	if (!fl) {
		g_off = 1;
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino) {
		// The fd was closed or reused: do not write into someone
		// else's file. A named output can still be appended to.
		const char *path = getenv("MEMTRACK_OUTPUT");
		if (path && *path && !getenv("MEMTRACK_PORT"))
			fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		else
			fd = -1;
		if (fd < 0) {
			g_off = 1;
			return 1;
		}
	}
	out_fd = fd;
	out_is_sock = S_ISSOCK(st.st_mode);
	epoch_ns = ep;
	return 1;
}

static void start_session(void)
{
	const char *port = getenv("MEMTRACK_PORT");
	const char *path = getenv("MEMTRACK_OUTPUT");
	int fd = 2;
	if (port && *port) {
		fd = open_listen(port);
		if (fd < 0) {
			g_off = 1;
			return;
		}
		out_is_sock = 1;
	} else if (path && *path) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			err_line("cannot open MEMTRACK_OUTPUT (check the directory and permissions): ", path);
			g_off = 1;
			return;
		}
	}
	if (fd != 2) {
		// Move the output out of the way of the program's own fds.
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	out_fd = fd;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		g_off = 1;
		return;
	}
	out_is_sock = S_ISSOCK(st.st_mode);
	if (follow && fd != 2) {
		// Exec'd children inherit the output fd.
		int fl = fcntl(fd, F_GETFD);
		fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
	}
	char v[160];
	snprintf(v, sizeof v, "%d:%llu:%llu:%llu:%d:%llu", fd, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, (unsigned long long)epoch_ns, follow,
		 (unsigned long long)(use_counter ? cnt_mult : 0));
	setenv(SESSION_ENV, v, 1);
}

static void read_cmdline(char *dst, size_t n)
{
	dst[0] = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t r = read(fd, dst, n - 1);
	close(fd);
	if (r <= 0)
		return;
	dst[r] = 0;
	for (ssize_t i = 0; i < r; i++)
		if (dst[i] == 0)
			dst[i] = ' ';
	while (r > 0 && dst[r - 1] == ' ')
		dst[--r] = 0;
}

static void write_start_line(int exec_child)
{
	char line[2048], *o = line, *end = line + sizeof line - 32;
	char comm[17], cmd[1024];
	read_comm(comm);
	read_cmdline(cmd, sizeof cmd);
	if (exec_child) {
		o = PUT_LIT(o, "[memtrace] proc event=exec ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = kv_u(o, "ppid", (uint64_t)getppid());
		o = kv_u(o, "ts", now_us());
	} else {
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		struct tm tm;
		gmtime_r(&rt.tv_sec, &tm);
		char start[64];
		snprintf(start, sizeof start, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rt.tv_nsec / 1000);
		o = PUT_LIT(o, "[memtrace] header version=" VERSION " ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = PUT_LIT(o, "start=");
		o = put_s(o, start, strlen(start));
		o = PUT_LIT(o, " mode=preload ");
	}
	o = PUT_LIT(o, "comm=");
	o = put_meta_val(o, end, comm);
	o = PUT_LIT(o, " cmd=");
	o = put_meta_val(o, end, cmd);
	*o++ = '\n';
	out_write_locked(line, (size_t)(o - line));
}

// early_replay closes the early buffer and logs what it holds, in order,
// as the hooks log calls made now (filters and the size table included).
static void early_replay(void)
{
	uint32_t n = __atomic_exchange_n(&early_n, EARLY_CLOSED, __ATOMIC_ACQ_REL);
	if (n > EARLY_CAP)
		n = EARLY_CAP;
	if (!g_ready || g_off)
		return;
	for (uint32_t i = 0; i < n; i++) {
		early_t *e = &early_ev[i];
		// A slot is filled as soon as its call returns: another
		// thread preempted in between is waited for, briefly.
		for (int k = 0; k < 10000 && __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == E_EMPTY; k++)
			sched_yield();
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != E_FILLED)
			continue;
		const void *p = (const void *)(uintptr_t)e->ptr;
		uint64_t size = 0, ts;
		switch (e->op) {
		case OP_FREE:
		case OP_DELETE:
		case OP_DELETEARR:
			if (g_bin) {
				bin_event(e->op, bin_ts(), p, 0);
			} else {
				ts = free_ts();
				if (before_free(p, &size, 0) == 1)
					on_free(e->op, size, p, ts);
			}
			break;
		case OP_MUNMAP:
			if (g_bin) {
				bin_event(OP_MUNMAP, bin_ts(), p, e->size);
			} else {
				ts = free_ts();
				if (before_free(p, &size, 1) == 1)
					on_free(OP_MUNMAP, e->size, p, ts);
			}
			break;
		default:
			on_alloc(e->op, e->size, p, e->kind);
		}
	}
}

static void init_once(void);

__attribute__((constructor)) static void init(void)
{
	int in = t_in;
	t_in = 1;
	init_once();
	early_replay();
	t_in = in;
}

static void init_once(void)
{
	resolve();
	init_op_cols();
	g_pid = getpid();
	{
		Dl_info info;
		if (dladdr((void *)&init_op_cols, &info))
			self_base = (uintptr_t)info.dli_fbase;
	}
	const char *fv = getenv("MEMTRACE_FOLLOW");
	follow = !(fv && strcmp(fv, "0") == 0);
	min_size = parse_size(getenv("MEMTRACK_MIN_SIZE"), 0);
	stack_depth = (int)parse_size(getenv("MEMTRACK_STACK_DEPTH"), 0);
	if (stack_depth > 128)
		stack_depth = 128;
	copy_env(stack_threads, sizeof stack_threads, "MEMTRACK_STACK_THREADS");
	copy_env(track_threads, sizeof track_threads, "MEMTRACK_TRACK_THREADS");
	const char *bs = getenv("MEMTRACK_BUFFER_SIZE");
	buf_size = parse_size(bs, 64 << 10);
	unbuffered = bs && *bs && buf_size == 0;
	buf_cap = ((unbuffered ? 0 : buf_size) + record_reserve() + 4095) & ~(size_t)4095;
	const char *mf = getenv("MEMTRACE_MMAP_FILES");
	mmap_files = mf && strcmp(mf, "1") == 0;

	int bm = bin_attach();
	if (bm) {
		if (!g_off) {
			pthread_key_create(&exit_key, bin_thread_exit);
			pthread_atfork(bin_atfork_prepare, bin_atfork_parent, bin_atfork_child);
			__atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
			bin_start_record(bm == 2);
		}
		return;
	}
	int exec_child = join_session();
	if (!exec_child)
		epoch_ns = mono_ns();
	if (!g_off)
		clock_init(2);
	if (!exec_child)
		start_session();
	if (g_off)
		return;
	pthread_key_create(&exit_key, thread_exit);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	write_start_line(exec_child);
	writer_start();
	__atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

// ---------------------------------------------------------------------------
// The hooks.

static void clear_in(int *p)
{
	t_in = *p;
}
#define ENTER int in_saved __attribute__((cleanup(clear_in))) = t_in; t_in = 1
#define ENSURE(fn) do { if (UNLIKELY(!resolved)) resolve(); } while (0)

EXPORT void *malloc(size_t n)
{
	if (UNLIKELY(!real_malloc)) {
		if (resolving)
			return boot_alloc(n);
		resolve();
	}
	if (t_in)
		return real_malloc(n);
	ENTER;
	void *p = real_malloc(n);
	if (p)
		on_alloc(OP_MALLOC, n, p, 0);
	return p;
}

EXPORT void *calloc(size_t a, size_t b)
{
	if (UNLIKELY(!real_calloc)) {
		if (resolving) {
			if (b && a > SIZE_MAX / b)
				return NULL;
			return boot_alloc(a * b); // static memory is zero
		}
		resolve();
	}
	if (t_in)
		return real_calloc(a, b);
	ENTER;
	void *p = real_calloc(a, b);
	if (p)
		on_alloc(OP_CALLOC, (uint64_t)a * b, p, 0);
	return p;
}

EXPORT void free(void *p)
{
	if (!p || is_boot(p))
		return;
	if (UNLIKELY(!real_free))
		resolve();
	if (t_in) {
		real_free(p);
		return;
	}
	ENTER;
	if (g_bin) {
		uint64_t bts = bin_ts();
		real_free(p);
		bin_event(OP_FREE, bts, p, 0);
		return;
	}
	if (UNLIKELY(!g_ready)) {
		int e = early_claim();
		if (e >= 0) {
			real_free(p);
			early_fill(e, OP_FREE, p, 0, 0);
			return;
		}
	}
	uint64_t ts = free_ts(), size = 0;
	int log = before_free(p, &size, 0);
	real_free(p);
	if (log == 1)
		on_free(OP_FREE, size, p, ts);
}

static void *do_realloc(void *p, size_t n, int op, void *(*fn)(void *, size_t, size_t), size_t a, size_t b)
{
	if (p && is_boot(p)) {
		void *q = (op == OP_REALLOC) ? real_malloc(n) : (b && a > SIZE_MAX / b ? NULL : real_malloc(a * b));
		if (q) {
			size_t old = boot_size(p);
			memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	if (t_in)
		return op == OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
	ENTER;
	if (g_bin) {
		// The consumer knows the old block's size; a failed realloc
		// logs nothing, realloc(p, 0) only the free.
		uint64_t bts = p ? bin_ts() : 0;
		void *q = op == OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
		if (p && (q || n == 0))
			bin_event(OP_FREE, bts, p, 0);
		if (q)
			bin_event(op, bin_ts(), q, n);
		return q;
	}
	if (UNLIKELY(!g_ready) && early_open()) {
		int e = p ? early_claim() : -1;
		void *q = op == OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
		early_fill(e, (q || n == 0) ? OP_FREE : -1, p, 0, 0);
		if (q)
			early_push(op, q, n, 0);
		return q;
	}
	uint64_t ts = 0, oldsize = 0, oldval = 0;
	int had = 0, log = 0;
	if (p) {
		ts = free_ts();
		had = tbl_take(p, &oldval);
		if (had) {
			oldsize = oldval >> 2;
			log = (oldval & V_LOGGED) != 0;
		} else {
			log = min_size == 0;
		}
	}
	void *q = op == OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
	if (!q) {
		// realloc(p, 0) frees p; any other NULL is a failure that
		// leaves p live and logs nothing.
		if (p && n == 0) {
			if (log)
				on_free(OP_FREE, oldsize, p, ts);
		} else if (p && had) {
			tbl_put(p, oldval);
		}
		return q;
	}
	if (p && log)
		on_free(OP_FREE, oldsize, p, ts);
	on_alloc(op, n, q, 0);
	return q;
}

EXPORT void *realloc(void *p, size_t n)
{
	if (UNLIKELY(!real_realloc)) {
		if (resolving) {
			void *q = boot_alloc(n);
			if (q && p)
				memcpy(q, p, boot_size(p) < n ? boot_size(p) : n);
			return q;
		}
		resolve();
	}
	return do_realloc(p, n, OP_REALLOC, NULL, 0, 0);
}

EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
	ENSURE();
	if (b && a > SIZE_MAX / b) {
		errno = ENOMEM;
		return NULL;
	}
	return do_realloc(p, a * b, OP_REALLOCARRAY, real_reallocarray, a, b);
}

EXPORT char *strdup(const char *s)
{
	ENSURE();
	if (t_in)
		return real_strdup(s);
	ENTER;
	char *p = real_strdup(s);
	if (p)
		on_alloc(OP_STRDUP, strlen(p) + 1, p, 0);
	return p;
}

EXPORT char *strndup(const char *s, size_t n)
{
	ENSURE();
	if (t_in)
		return real_strndup(s, n);
	ENTER;
	char *p = real_strndup(s, n);
	if (p)
		on_alloc(OP_STRNDUP, strlen(p) + 1, p, 0);
	return p;
}

EXPORT int posix_memalign(void **out, size_t al, size_t n)
{
	ENSURE();
	if (t_in)
		return real_posix_memalign(out, al, n);
	ENTER;
	int r = real_posix_memalign(out, al, n);
	if (r == 0 && *out)
		on_alloc(OP_POSIX_MEMALIGN, n, *out, 0);
	return r;
}

#define ALIGNED_HOOK(NAME, OP, ARGS, CALL, SIZE)      \
	EXPORT void *NAME ARGS                         \
	{                                              \
		ENSURE();                              \
		if (t_in)                              \
			return real_##NAME CALL;       \
		ENTER;                                 \
		void *p = real_##NAME CALL;            \
		if (p)                                 \
			on_alloc(OP, SIZE, p, 0);      \
		return p;                              \
	}

ALIGNED_HOOK(aligned_alloc, OP_ALIGNED_ALLOC, (size_t al, size_t n), (al, n), n)
ALIGNED_HOOK(memalign, OP_MEMALIGN, (size_t al, size_t n), (al, n), n)
ALIGNED_HOOK(valloc, OP_VALLOC, (size_t n), (n), n)
ALIGNED_HOOK(pvalloc, OP_PVALLOC, (size_t n), (n), n)

// mmap family: anonymous mappings only, unless MEMTRACE_MMAP_FILES=1.

static void *mmap_common(void *r, size_t len, int flags)
{
	if (r != MAP_FAILED && ((flags & MAP_ANONYMOUS) || mmap_files))
		on_alloc(OP_MMAP, len, r, V_MMAP);
	return r;
}

EXPORT void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	ENSURE();
	if (t_in)
		return real_mmap(a, len, prot, flags, fd, off);
	ENTER;
	return mmap_common(real_mmap(a, len, prot, flags, fd, off), len, flags);
}

#if __SIZEOF_POINTER__ == 4
EXPORT void *mmap64(void *a, size_t len, int prot, int flags, int fd, off64_t off)
{
	ENSURE();
	if (t_in)
		return real_mmap64(a, len, prot, flags, fd, off);
	ENTER;
	return mmap_common(real_mmap64(a, len, prot, flags, fd, off), len, flags);
}
#endif

EXPORT int munmap(void *p, size_t len)
{
	ENSURE();
	if (t_in)
		return real_munmap(p, len);
	ENTER;
	if (g_bin) {
		// Logged by the consumer only for a mapping it saw created.
		uint64_t bts = bin_ts();
		int br = real_munmap(p, len);
		if (br == 0)
			bin_event(OP_MUNMAP, bts, p, len);
		return br;
	}
	if (UNLIKELY(!g_ready) && early_open()) {
		int e = early_claim();
		int r = real_munmap(p, len);
		early_fill(e, r == 0 ? OP_MUNMAP : -1, p, len, 0);
		return r;
	}
	uint64_t ts = free_ts(), size = 0, v = 0;
	int log = before_free(p, &size, 1);
	int r = real_munmap(p, len);
	if (log < 0)
		return r;
	if (r != 0) {
		// Failed: the mapping stays.
		tbl_put(p, (size << 2) | V_MMAP | (log ? V_LOGGED : 0));
		return r;
	}
	(void)v;
	if (log)
		on_free(OP_MUNMAP, len, p, ts);
	return r;
}

EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	ENSURE();
	void *na = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		na = va_arg(ap, void *);
		va_end(ap);
	}
	if (t_in)
		return real_mremap(old, oldlen, newlen, flags, na);
	ENTER;
	if (g_bin) {
		uint64_t bts = bin_ts();
		void *br = real_mremap(old, oldlen, newlen, flags, na);
		if (br != MAP_FAILED) {
			bin_event(OP_MUNMAP, bts, old, oldlen);
			bin_event(OP_MREMAP, bin_ts(), br, newlen);
		}
		return br;
	}
	if (UNLIKELY(!g_ready) && early_open()) {
		int e = early_claim();
		void *r = real_mremap(old, oldlen, newlen, flags, na);
		early_fill(e, r != MAP_FAILED ? OP_MUNMAP : -1, old, oldlen, 0);
		if (r != MAP_FAILED)
			early_push(OP_MREMAP, r, newlen, V_MMAP);
		return r;
	}
	uint64_t ts = free_ts(), size = 0;
	int log = before_free(old, &size, 1);
	void *r = real_mremap(old, oldlen, newlen, flags, na);
	if (log < 0)
		return r;
	if (r == MAP_FAILED) {
		tbl_put(old, (size << 2) | V_MMAP | (log ? V_LOGGED : 0));
		return r;
	}
	if (log)
		on_free(OP_MUNMAP, oldlen, old, ts);
	on_alloc(OP_MREMAP, newlen, r, V_MMAP);
	return r;
}

// C++ operators: the real ones (libstdc++'s) run with t_in set, so their
// inner malloc is not logged; a throwing new unwinds through here (the
// library is built with -fexceptions) and the cleanup restores t_in.

typedef void *(*new_fn)(size_t);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);
typedef void (*del_fn)(void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_al_fn)(void *, size_t);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

#define LAZY(var, type, name)                                   \
	static type var;                                        \
	if (UNLIKELY(!var)) {                                   \
		ENSURE();                                       \
		var = (type)sym(name);                          \
	}

#define NEW_HOOK(CNAME, MANGLED, OP, PARAMS, TYPE, CALL)        \
	EXPORT void *CNAME PARAMS __asm__(MANGLED);             \
	void *CNAME PARAMS                                      \
	{                                                       \
		LAZY(fn, TYPE, MANGLED);                        \
		if (t_in)                                       \
			return fn CALL;                         \
		ENTER;                                          \
		void *p = fn CALL;                              \
		if (p)                                          \
			on_alloc(OP, n, p, 0);                  \
		return p;                                       \
	}

NEW_HOOK(mt_new, "_Znw" ZSZ, OP_NEW, (size_t n), new_fn, (n))
NEW_HOOK(mt_newa, "_Zna" ZSZ, OP_NEWARR, (size_t n), new_fn, (n))
NEW_HOOK(mt_new_nt, "_Znw" ZSZ "RKSt9nothrow_t", OP_NEW, (size_t n, const void *nt), new_nt_fn, (n, nt))
NEW_HOOK(mt_newa_nt, "_Zna" ZSZ "RKSt9nothrow_t", OP_NEWARR, (size_t n, const void *nt), new_nt_fn, (n, nt))
NEW_HOOK(mt_new_al, "_Znw" ZSZ "St11align_val_t", OP_NEW, (size_t n, size_t al), new_al_fn, (n, al))
NEW_HOOK(mt_newa_al, "_Zna" ZSZ "St11align_val_t", OP_NEWARR, (size_t n, size_t al), new_al_fn, (n, al))
NEW_HOOK(mt_new_al_nt, "_Znw" ZSZ "St11align_val_tRKSt9nothrow_t", OP_NEW, (size_t n, size_t al, const void *nt), new_al_nt_fn, (n, al, nt))
NEW_HOOK(mt_newa_al_nt, "_Zna" ZSZ "St11align_val_tRKSt9nothrow_t", OP_NEWARR, (size_t n, size_t al, const void *nt), new_al_nt_fn, (n, al, nt))

#define DEL_HOOK(CNAME, MANGLED, OP, PARAMS, TYPE, CALL)        \
	EXPORT void CNAME PARAMS __asm__(MANGLED);              \
	void CNAME PARAMS                                       \
	{                                                       \
		LAZY(fn, TYPE, MANGLED);                        \
		if (!p || t_in) {                               \
			fn CALL;                                \
			return;                                 \
		}                                               \
		ENTER;                                          \
		if (g_bin) {                                    \
			uint64_t bts = bin_ts();               \
			fn CALL;                                \
			bin_event(OP, bts, p, 0);               \
			return;                                 \
		}                                               \
		if (UNLIKELY(!g_ready)) {                       \
			int e_ = early_claim();                 \
			if (e_ >= 0) {                          \
				fn CALL;                        \
				early_fill(e_, OP, p, 0, 0);    \
				return;                         \
			}                                       \
		}                                               \
		uint64_t ts = free_ts(), size = 0;              \
		int log = before_free(p, &size, 0);             \
		fn CALL;                                        \
		if (log == 1)                                   \
			on_free(OP, size, p, ts);               \
	}

DEL_HOOK(mt_del, "_ZdlPv", OP_DELETE, (void *p), del_fn, (p))
DEL_HOOK(mt_dela, "_ZdaPv", OP_DELETEARR, (void *p), del_fn, (p))
DEL_HOOK(mt_del_sz, "_ZdlPv" ZSZ, OP_DELETE, (void *p, size_t sz), del_sz_fn, (p, sz))
DEL_HOOK(mt_dela_sz, "_ZdaPv" ZSZ, OP_DELETEARR, (void *p, size_t sz), del_sz_fn, (p, sz))
DEL_HOOK(mt_del_al, "_ZdlPvSt11align_val_t", OP_DELETE, (void *p, size_t al), del_al_fn, (p, al))
DEL_HOOK(mt_dela_al, "_ZdaPvSt11align_val_t", OP_DELETEARR, (void *p, size_t al), del_al_fn, (p, al))
DEL_HOOK(mt_del_sz_al, "_ZdlPv" ZSZ "St11align_val_t", OP_DELETE, (void *p, size_t sz, size_t al), del_sz_al_fn, (p, sz, al))
DEL_HOOK(mt_dela_sz_al, "_ZdaPv" ZSZ "St11align_val_t", OP_DELETEARR, (void *p, size_t sz, size_t al), del_sz_al_fn, (p, sz, al))
DEL_HOOK(mt_del_nt, "_ZdlPvRKSt9nothrow_t", OP_DELETE, (void *p, const void *nt), del_nt_fn, (p, nt))
DEL_HOOK(mt_dela_nt, "_ZdaPvRKSt9nothrow_t", OP_DELETEARR, (void *p, const void *nt), del_nt_fn, (p, nt))
DEL_HOOK(mt_del_al_nt, "_ZdlPvSt11align_val_tRKSt9nothrow_t", OP_DELETE, (void *p, size_t al, const void *nt), del_al_nt_fn, (p, al, nt))
DEL_HOOK(mt_dela_al_nt, "_ZdaPvSt11align_val_tRKSt9nothrow_t", OP_DELETEARR, (void *p, size_t al, const void *nt), del_al_nt_fn, (p, al, nt))

// Thread names: a rename bumps a generation that every thread checks on
// its next event (the other thread's name is re-read from the kernel then).

EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	ENSURE();
	int r = real_pthread_setname_np(th, name);
	if (r == 0)
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	return r;
}

EXPORT int prctl(int option, ...)
{
	ENSURE();
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	int r = real_prctl(option, a2, a3, a4, a5);
	if (r == 0 && option == PR_SET_NAME)
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	return r;
}

// exec and _exit discard the process's memory: write the buffers first.

static void bin_seal(void);
static void bin_publish_lost(void);

static void before_exec(void)
{
	int in = t_in;
	t_in = 1;
	if (g_bin) {
		// The new image starts its own streams; this chunk is done.
		if (g_ready && !g_off) {
			bin_publish_lost();
			bin_seal();
		}
	} else if (g_ready)
		flush_all(0);
	t_in = in;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_execve(path, argv, envp);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_execvpe(file, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_fexecve(fd, argv, envp);
}

#define COLLECT_ARGS(first, ap, argv)                                   \
	do {                                                            \
		size_t n_ = 1;                                          \
		va_list c_;                                             \
		va_copy(c_, ap);                                        \
		while (va_arg(c_, char *))                              \
			n_++;                                           \
		va_end(c_);                                             \
		argv = alloca((n_ + 1) * sizeof(char *));               \
		argv[0] = (char *)(first);                              \
		for (size_t i_ = 1; i_ <= n_; i_++)                     \
			argv[i_] = i_ < n_ ? va_arg(ap, char *) : NULL; \
	} while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	(void)va_arg(ap, char *); // the NULL that ends the arguments
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}

EXPORT void _exit(int status)
{
	process_exit();
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	_exit(status);
}
