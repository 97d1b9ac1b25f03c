/*
 * unwind_truth.h: the stack oracle's record (unwind_oracle.cc, unwind_dl.cc;
 * read by tests/stacks_dwarf_test.go). Right before each allocation the
 * function making it calls glibc's backtrace() (the DWARF unwinder), and
 * the record keeps those return addresses next to the event, so that a
 * tracer's stack for that event can be compared frame for frame.
 *
 * The first line is "pid N" (the process's, whose main thread has tid N);
 * then record lines, in each thread's call order:
 *   "tid op size ptr kind addr0 addr1 ..."
 *   size  decimal, or "LO-HI" where the program cannot know the exact size
 *         (fopen's FILE: glibc's struct is private; the range is
 *         sizeof(FILE) .. malloc_usable_size)
 *   ptr   0x-prefixed hex
 *   kind  "d"        the function that called backtrace() called the
 *                    allocation function itself: the log's frame #0 is in
 *                    the same function as addr0, the log's frames from #1
 *                    on are addr1, addr2, ...
 *         "i:LIB"    it called a function of LIB (e.g. libc.so.6) that
 *                    allocated: the log's first frames are in LIB, then one
 *                    in the same function as addr0, then addr1, addr2, ...
 *         "-"        no stack is compared (frees)
 *         "gap"      untraced library work follows (the log may hold
 *                    events the record does not name until the next record)
 *   addrN absolute, 0x-prefixed hex (frame 0 is the return address of the
 *         backtrace() call)
 *
 * Recording never allocates: records go into a static array and are
 * formatted by hand and written with write(2) at the end.
 */
#ifndef UNWIND_TRUTH_H
#define UNWIND_TRUTH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "put.h"
#include <execinfo.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UT_NOINLINE __attribute__((noinline))
/* Keeps a call where the source has it: the compiler may neither move
 * memory accesses across it nor merge the code around it. */
#define UT_BARRIER() __asm__ volatile("" ::: "memory")
/* More than any stack the program builds, so a record is never cut. */
#define UT_MAXF 100

typedef void (*ut_record_fn)(const char *op, uint64_t size, uint64_t size_hi, const void *ptr, const char *kind,
			     void *const *pcs, int n);

#ifdef UT_LIBRARY
/* A dlopen'ed library records through the program's recorder, set by its
 * init function, so that all records go into one array in call order. */
static ut_record_fn ut_sink;
#define UT_REC (*ut_sink)
#else
static void ut_record(const char *op, uint64_t size, uint64_t size_hi, const void *ptr, const char *kind,
		      void *const *pcs, int n);
#define UT_REC ut_record
#endif

/* UT_ALLOC records the backtrace of the calling function, then evaluates
 * the allocation expression in that same function. The record is made
 * after the call, so that the allocation is never a tail call. */
#define UT_ALLOC(op, size, expr)                                                                  \
	__extension__({                                                                            \
		void *ut_bt_[UT_MAXF];                                                             \
		int ut_n_ = backtrace(ut_bt_, UT_MAXF);                                            \
		UT_BARRIER();                                                                      \
		void *ut_p_ = (expr);                                                              \
		UT_BARRIER();                                                                      \
		UT_REC(op, (uint64_t)(size), 0, ut_p_, "d", ut_bt_, ut_n_);                        \
		ut_p_;                                                                             \
	})

/* UT_FREE records a release before it happens (nothing is allocated in
 * between, so the order is the call order). */
#define UT_FREE(op, size, ptr) UT_REC(op, (uint64_t)(size), 0, (ptr), "-", 0, 0)
#define UT_GAP() UT_REC("gap", 0, 0, 0, "gap", 0, 0)

#ifndef UT_LIBRARY

#define UT_MAXREC 12000

struct ut_rec {
	int tid;
	int n;
	const char *op;
	const char *kind;
	uint64_t size, size_hi;
	uintptr_t ptr;
	void *pcs[UT_MAXF];
};

static struct ut_rec ut_recs[UT_MAXREC];
static int ut_nrec;

static void ut_die(const char *msg)
{
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
	_exit(99);
}

static void ut_record(const char *op, uint64_t size, uint64_t size_hi, const void *ptr, const char *kind,
		      void *const *pcs, int n)
{
	int i = __atomic_fetch_add(&ut_nrec, 1, __ATOMIC_RELAXED);
	if (i >= UT_MAXREC)
		ut_die("unwind_truth: too many records\n");
	if (n >= UT_MAXF)
		ut_die("unwind_truth: a backtrace filled the buffer: raise UT_MAXF\n");
	struct ut_rec *r = &ut_recs[i];
	r->tid = (int)syscall(SYS_gettid);
	r->op = op;
	r->kind = kind;
	r->size = size;
	r->size_hi = size_hi;
	r->ptr = (uintptr_t)ptr;
	r->n = n;
	if (n > 0)
		memcpy(r->pcs, pcs, sizeof(void *) * (size_t)n);
}

static char *ut_put_s(char *o, const char *s)
{
	size_t l = strlen(s);
	memcpy(o, s, l);
	return o + l;
}

/* ut_write writes the records to $MEMTRACE_TRUTH followed by suffix
 * ("" for the program's own, ".pre" before an exec, ".child" in a forked
 * child); call it after the last recorded call. */
static void ut_write(const char *suffix)
{
	const char *path = getenv("MEMTRACE_TRUTH");
	if (!path)
		return;
	static char fn[4096];
	if (strlen(path) + strlen(suffix) >= sizeof fn)
		ut_die("unwind_truth: path too long\n");
	char *e = ut_put_s(fn, path);
	e = ut_put_s(e, suffix);
	*e = 0;
	int fd = open(fn, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		ut_die("unwind_truth: cannot open $MEMTRACE_TRUTH\n");
	static char line[128 + UT_MAXF * 20];
	char *o = ut_put_s(line, "pid ");
	o = put_u(o, (uint64_t)getpid());
	*o++ = '\n';
	if (write(fd, line, (size_t)(o - line)) != o - line)
		ut_die("unwind_truth: write failed\n");
	int nrec = __atomic_load_n(&ut_nrec, __ATOMIC_ACQUIRE);
	for (int i = 0; i < nrec; i++) {
		struct ut_rec *r = &ut_recs[i];
		char *o = line;
		o = put_u(o, (uint64_t)r->tid);
		*o++ = ' ';
		o = ut_put_s(o, r->op);
		*o++ = ' ';
		o = put_u(o, r->size);
		if (r->size_hi) {
			*o++ = '-';
			o = put_u(o, r->size_hi);
		}
		*o++ = ' ';
		o = put_hex(o, r->ptr);
		*o++ = ' ';
		o = ut_put_s(o, r->kind);
		for (int k = 0; k < r->n; k++) {
			*o++ = ' ';
			o = put_hex(o, (uintptr_t)r->pcs[k]);
		}
		*o++ = '\n';
		if (write(fd, line, (size_t)(o - line)) != o - line)
			ut_die("unwind_truth: write failed\n");
	}
	close(fd);
}

/* ut_forked starts a forked child's own record. */
static void ut_forked(void)
{
	ut_nrec = 0;
}

#endif /* !UT_LIBRARY */
#endif
