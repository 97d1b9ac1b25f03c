// text.h: the text mode (memtrack's drop-in: LD_PRELOAD with MEMTRACK_*
// and no memtrace process), whose parts share this header:
//   text.c          per-thread buffers of formatted lines, the sink,
//                   thread and process ends, fork
//   text_fmt.c      formatting, byte for byte what logfmt writes
//   text_out.c      writing the output: the lock, SIGPIPE, the writer thread
//   text_session.c  opening the output, exec'd children, the start line
//   tcp.c           MEMTRACK_PORT's server
#ifndef MT_TEXT_H
#define MT_TEXT_H

#include "mt.h"

#include <signal.h>
#include <time.h>

#pragma GCC visibility push(hidden)

#define LINE_MAX_EV 256
#define FRAME_MAX 1024

// Per-thread state. States live in raw mappings (not TLS) so that another
// thread can flush them at exit, exec and _exit.
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

extern int unbuffered;     // MEMTRACK_BUFFER_SIZE=0: one write per event
extern size_t buf_cap;     // bytes per buffer (a multiple of the page)

// ---------------------------------------------------------------------------
// Formatting (text_fmt.c). Callers leave 16 bytes of slack past every
// padded field.

extern const char digits2[201];
extern const uint64_t pow10_tab[20];
extern char op_col[MT_NOPS][24];         // "op" padded as logfmt pads it, then " ts="
extern unsigned char op_col_len[MT_NOPS];

void init_op_cols(void);
char *put_meta_val(char *o, char *end, const char *v);
char *put_name15(char *o, const char *name);
char *kv_u(char *o, const char *k, uint64_t v);
// put_start writes a header's start= as logfmt.StartLayout does (RFC 3339
// in UTC with the nanoseconds, trailing zeros dropped, none when 0).
char *put_start(char *o, const struct timespec *t);

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

// ---------------------------------------------------------------------------
// Output (text_out.c).

extern int out_fd;
extern int out_is_sock;
extern volatile int out_dead; // the reader went away: stop logging

// A pipe whose reader left would raise SIGPIPE: writers block it around the
// write and swallow a pending one, so the program never dies of it. Sockets
// use MSG_NOSIGNAL instead.
typedef struct {
	sigset_t old;
	int blocked;
} wguard_t;

void wlock(wguard_t *g);
void wunlock(wguard_t *g);
void out_write(const char *p, size_t n); // under wlock
// out_write_locked serialises whole chunks so that a chunk's lines stay
// together on pipes and sockets, where write(2) is not atomic.
void out_write_locked(const char *p, size_t n);

char *buf_get(void);
// owner_flush empties the owner's buffer so it can start again at 0. With
// final, the thread is ending: the buffer is handed over for good.
void owner_flush(tstate *t, int final);
// flush_state writes what is committed but not yet written; the owner and
// other threads (exit, exec) both use it.
void flush_state(tstate *t);
void q_drain(void);
void writer_start(void);
// Fork: the prepare handler takes every lock so that the child inherits
// none held by a thread that does not exist there, in the order
// reg_lock (text.c), the FIFO's (out_fork_lock_queue, which writes the FIFO
// out first: the writer thread does not exist in the child), the table's,
// the write lock (out_fork_lock_write).
void out_fork_lock_queue(void);
void out_fork_lock_write(void);
void out_fork_parent(void); // unlocks both
void out_fork_child(void);  // resets both; the writer thread stayed in the parent

// ---------------------------------------------------------------------------
// Session (text_session.c, tcp.c).

// join_session: an exec'd child continues its parent's output; 1 when it
// does (or must stay off).
int join_session(void);
void start_session(void);
void write_start_line(int exec_child);
int open_listen(const char *port_s);

#pragma GCC visibility pop

#endif
