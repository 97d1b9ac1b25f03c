/*
 * truth.h: how a test program records what it did, for the Go harness to
 * compare with the log. Recording never allocates through the traced
 * functions: records go into a static array, and are formatted with our own
 * integer formatting and written with write(2) at the end.
 *
 * Record lines (file named by $MEMTRACE_TRUTH, one per event, per thread in
 * call order): "tid op size ptr name"
 *   op    an op of docs/spec.md §3, or "gap" (untraced library work follows in this
 *         thread: the log may hold events the truth does not name until the
 *         next record), or "exit" (the thread is about to end)
 *   size  bytes (for frees: the size of the block released)
 *   ptr   0x-prefixed hex
 *   name  the thread's name at the time, or "-" when the program did not set it
 *
 * A forked child records into a fresh array and writes
 * "$MEMTRACE_TRUTH.child.<pid>".
 *
 * With $MEMTRACE_TEST_WAIT set, truth_init writes "ready\n" to stdout and
 * blocks on one byte from stdin before any recorded work (attach mode).
 */
#ifndef MEMTRACE_TRUTH_H
#define MEMTRACE_TRUTH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "put.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRUTH_MAX 60000

struct truth_rec {
	int tid;
	const char *op;
	uint64_t size;
	uintptr_t ptr;
	char name[16];
};

static struct truth_rec truth_recs[TRUTH_MAX];
static int truth_n;
static int truth_lock_v;
static int truth_is_child;
static __thread char truth_tname[16];

/* The sink makes every pointer escape, so that the compiler cannot elide a
 * malloc/free or new/delete pair. */
static __thread void *volatile truth_sink; /* per thread: a shared one hands one thread another's pointer */

static inline void *escape(void *p)
{
	truth_sink = p;
	return truth_sink;
}

static void truth_die(const char *msg)
{
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
	_exit(99);
}

static void truth_lock(void)
{
	while (__atomic_exchange_n(&truth_lock_v, 1, __ATOMIC_ACQUIRE))
		;
}

static void truth_unlock(void)
{
	__atomic_store_n(&truth_lock_v, 0, __ATOMIC_RELEASE);
}

static void truth_rec(const char *op, uint64_t size, const void *ptr)
{
	int tid = (int)syscall(SYS_gettid);
	truth_lock();
	if (truth_n >= TRUTH_MAX)
		truth_die("truth: too many records\n");
	struct truth_rec *r = &truth_recs[truth_n++];
	r->tid = tid;
	r->op = op;
	r->size = size;
	r->ptr = (uintptr_t)ptr;
	memcpy(r->name, truth_tname, 16);
	truth_unlock();
}

static void truth_gap(void)
{
	truth_rec("gap", 0, 0);
}

static void truth_exit(void)
{
	truth_rec("exit", 0, 0);
}

/* truth_setname names the calling thread and remembers the name for the
 * records that follow. */
static void truth_setname(const char *name)
{
	if (pthread_setname_np(pthread_self(), name) != 0)
		truth_die("truth: pthread_setname_np failed\n");
	strncpy(truth_tname, name, 15);
	truth_tname[15] = 0;
}

/* truth_write writes the records; call it after the last traced call. */
static void truth_write(void)
{
	const char *path = getenv("MEMTRACE_TRUTH");
	if (!path)
		return;
	char fn[4096];
	size_t pl = strlen(path);
	if (pl > sizeof fn - 64)
		truth_die("truth: path too long\n");
	memcpy(fn, path, pl);
	char *e = fn + pl;
	if (truth_is_child) {
		memcpy(e, ".child.", 7);
		e = put_u(e + 7, (uint64_t)getpid());
	}
	*e = 0;
	int fd = open(fn, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		truth_die("truth: cannot open $MEMTRACE_TRUTH\n");
	static char line[128];
	truth_lock();
	for (int i = 0; i < truth_n; i++) {
		struct truth_rec *r = &truth_recs[i];
		char *o = line;
		o = put_u(o, (uint64_t)r->tid);
		*o++ = ' ';
		size_t ol = strlen(r->op);
		memcpy(o, r->op, ol);
		o += ol;
		*o++ = ' ';
		o = put_u(o, r->size);
		*o++ = ' ';
		o = put_hex(o, r->ptr);
		*o++ = ' ';
		if (r->name[0]) {
			size_t nl = strlen(r->name);
			memcpy(o, r->name, nl);
			o += nl;
		} else {
			*o++ = '-';
		}
		*o++ = '\n';
		if (write(fd, line, (size_t)(o - line)) != o - line)
			truth_die("truth: write failed\n");
	}
	truth_unlock();
	close(fd);
}

/* truth_forked starts the child's own record (call it right after fork in
 * the child). */
static void truth_forked(void)
{
	truth_lock_v = 0;
	truth_n = 0;
	truth_is_child = 1;
}

static void truth_init(void)
{
	if (getenv("MEMTRACE_TEST_WAIT")) {
		char c;
		if (write(1, "ready\n", 6) != 6)
			truth_die("truth: cannot write ready\n");
		if (read(0, &c, 1) != 1)
			truth_die("truth: stdin closed before the go byte\n");
	}
}

#ifdef __cplusplus
}
#endif
#endif
