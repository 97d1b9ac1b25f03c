// text_out.c: writing the text log: one lock so that a chunk's lines stay
// together, SIGPIPE kept away from the program, and the writer thread.
#include "text.h"

#include <stdlib.h>
#include <sys/socket.h>

int out_fd = 2;
int out_is_sock;
volatile int out_dead;

static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

void out_write(const char *p, size_t n)
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

void wlock(wguard_t *g)
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

void wunlock(wguard_t *g)
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

void out_write_locked(const char *p, size_t n)
{
	if (!n)
		return;
	wguard_t g;
	wlock(&g);
	out_write(p, n);
	wunlock(&g);
}

void flush_state(tstate *t)
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

typedef struct {
	char *buf;
	size_t off, len;
} qitem_t;

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;    // items queued
static pthread_cond_t q_space = PTHREAD_COND_INITIALIZER; // an item written
static qitem_t q_items[QMAX];
static int q_head, q_n, q_writing;
static char *q_pool[QMAX + 4];
static int q_npool;
static volatile int writer_on;

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

char *buf_get(void)
{
	pthread_mutex_lock(&q_mu);
	char *b = buf_get_locked();
	pthread_mutex_unlock(&q_mu);
	return b;
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
// The slots it empties are space for threads that wait in owner_flush:
// they are woken as the writer wakes them. Without that, a fork that
// drained a full FIFO while every allocating thread waited for a slot
// left them waiting for ever: the writer, with nothing queued, waits for
// them in turn (the program hung at its next join).
static void q_drain_locked(void)
{
	while (q_writing)
		pthread_cond_wait(&q_space, &q_mu);
	int drained = q_n > 0;
	while (q_n > 0) {
		qitem_t it = q_items[q_head];
		q_head = (q_head + 1) % QMAX;
		q_n--;
		out_write_locked(it.buf + it.off, it.len);
		buf_put_locked(it.buf);
	}
	if (drained)
		pthread_cond_broadcast(&q_space);
}

void q_drain(void)
{
	if (!writer_on)
		return;
	pthread_mutex_lock(&q_mu);
	q_drain_locked();
	pthread_mutex_unlock(&q_mu);
}

void owner_flush(tstate *t, int final)
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

void writer_start(void)
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

void out_fork_lock_queue(void)
{
	if (writer_on) {
		pthread_mutex_lock(&q_mu);
		q_drain_locked();
	}
}

void out_fork_lock_write(void)
{
	pthread_mutex_lock(&write_mu);
}

void out_fork_parent(void)
{
	pthread_mutex_unlock(&write_mu);
	if (writer_on)
		pthread_mutex_unlock(&q_mu);
}

void out_fork_child(void)
{
	pthread_mutex_init(&write_mu, NULL);
	pthread_mutex_init(&q_mu, NULL);
	pthread_cond_init(&q_cv, NULL);
	pthread_cond_init(&q_space, NULL);
	q_writing = 0;
	writer_on = 0;
}
