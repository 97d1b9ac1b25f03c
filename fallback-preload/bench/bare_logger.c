// bare_logger.so: the floor for the preload benchmark. It interposes malloc
// and free and writes one 32-byte binary record per call (timestamp, ptr,
// size, tid+op) into a per-thread buffer flushed with write(2): the least a
// logger can do. No text, no ptr->size table, no reentrancy subtleties
// beyond a bootstrap arena. Output: $BARE_OUTPUT.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct rec { uint64_t ts, ptr, size; uint32_t tid, op; };

static void *(*rmalloc)(size_t);
static void (*rfree)(void *);
static int fd = -1;
static char arena[1 << 16];
static size_t arena_used;
static int resolving;

#define NREC 2048
static __thread struct rec buf[NREC] __attribute__((tls_model("initial-exec")));
static __thread int nrec __attribute__((tls_model("initial-exec")));
static __thread uint32_t tid __attribute__((tls_model("initial-exec")));

static inline uint64_t now(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

static void flush(void)
{
	if (fd >= 0 && nrec) {
		ssize_t w = write(fd, buf, sizeof(struct rec) * (size_t)nrec);
		(void)w;
	}
	nrec = 0;
}

static inline void put(uint64_t p, uint64_t size, uint32_t op)
{
	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	struct rec *r = &buf[nrec];
	r->ts = now();
	r->ptr = p;
	r->size = size;
	r->tid = tid;
	r->op = op;
	if (++nrec == NREC)
		flush();
}

static void resolve(void)
{
	resolving = 1;
	rmalloc = dlsym(RTLD_NEXT, "malloc");
	rfree = dlsym(RTLD_NEXT, "free");
	resolving = 0;
}

__attribute__((constructor)) static void init(void)
{
	if (!rmalloc)
		resolve();
	const char *o = getenv("BARE_OUTPUT");
	if (o)
		fd = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

__attribute__((destructor)) static void fini(void)
{
	flush();
}

void *malloc(size_t n)
{
	if (!rmalloc) {
		if (resolving) {
			void *p = arena + arena_used;
			arena_used += (n + 15) & ~(size_t)15;
			return p;
		}
		resolve();
	}
	void *p = rmalloc(n);
	put((uint64_t)(uintptr_t)p, n, 1);
	return p;
}

void free(void *p)
{
	if ((char *)p >= arena && (char *)p < arena + sizeof arena)
		return;
	if (!rfree)
		resolve();
	put((uint64_t)(uintptr_t)p, 0, 2);
	rfree(p);
}
