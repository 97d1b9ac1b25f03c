// early.c: calls made before the constructor has run (constructors of
// libraries initialised before this one, such as libstdc++'s 72 KiB
// exception pool) are kept here and replayed, in order, once the output is
// set up. Static memory only, no lock: a slot is claimed with an atomic add
// and published with a release store, so a second thread that a constructor
// started is safe too. A free claims its slot before the real call (so that
// a block reused by another thread comes after it) and fills it afterwards;
// a call that failed leaves its slot void. The constructor closes the
// buffer; calls that find it full or closed go the text mode's way (which,
// before the constructor, logs nothing and keeps the table).
#include "mt.h"

#include <sched.h>

#define EARLY_CAP 256
#define EARLY_CLOSED 0x40000000u

enum { E_EMPTY, E_FILLED, E_VOID };

typedef struct {
	uint64_t ptr, size, kind;
	int op, state;
} early_t;

static early_t early_ev[EARLY_CAP];
static uint32_t early_n;
static const mt_sink *fallback = &text_sink;

void early_set_fallback(const mt_sink *s)
{
	__atomic_store_n(&fallback, s, __ATOMIC_RELEASE);
}

static inline const mt_sink *text_way(void)
{
	return __atomic_load_n(&fallback, __ATOMIC_ACQUIRE);
}

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

static void early_alloc(int op, uint64_t size, const void *p, uint64_t kind)
{
	if (!early_push(op, p, size, kind))
		text_way()->alloc(op, size, p, kind);
}

static void early_free(int op, void *p, void (*real)(void *))
{
	int slot = early_claim();
	if (slot < 0) {
		text_way()->free(op, p, real);
		return;
	}
	real(p);
	early_fill(slot, op, p, 0, 0);
}

static void early_free_pre(mt_call_t *c, const void *p)
{
	c->slot = early_claim();
	if (c->slot < 0)
		text_way()->free_pre(c, p);
}

static void early_free_post(mt_call_t *c, int op, const void *p)
{
	if (c->slot >= 0)
		early_fill(c->slot, op, p, 0, 0);
	else
		text_way()->free_post(c, op, p);
}

static void early_realloc_pre(mt_call_t *c, const void *p)
{
	c->early = early_open();
	if (c->early)
		c->slot = p ? early_claim() : -1;
	else
		text_way()->realloc_pre(c, p);
}

static void early_realloc_post(mt_call_t *c, int op, const void *p, const void *q, size_t n)
{
	if (!c->early) {
		text_way()->realloc_post(c, op, p, q, n);
		return;
	}
	early_fill(c->slot, (q || n == 0) ? MT_OP_FREE : -1, p, 0, 0);
	if (q)
		early_push(op, q, n, 0);
}

static void early_unmap_pre(mt_call_t *c, const void *p)
{
	c->early = early_open();
	if (c->early)
		c->slot = early_claim();
	else
		text_way()->unmap_pre(c, p);
}

static void early_unmap_post(mt_call_t *c, const void *p, size_t len, int ok)
{
	if (c->early)
		early_fill(c->slot, ok ? MT_OP_MUNMAP : -1, p, len, 0);
	else
		text_way()->unmap_post(c, p, len, ok);
}

static void early_remap_post(mt_call_t *c, const void *old, size_t oldlen, const void *r, size_t newlen)
{
	if (!c->early) {
		text_way()->remap_post(c, old, oldlen, r, newlen);
		return;
	}
	early_fill(c->slot, r != MAP_FAILED ? MT_OP_MUNMAP : -1, old, oldlen, 0);
	if (r != MAP_FAILED)
		early_push(MT_OP_MREMAP, r, newlen, V_MMAP);
}

static void early_before_exec(void)
{
	text_way()->before_exec();
}

static void early_process_exit(void)
{
	text_way()->process_exit();
}

const mt_sink early_sink = {
	.alloc = early_alloc,
	.free = early_free,
	.free_pre = early_free_pre,
	.free_post = early_free_post,
	.realloc_pre = early_realloc_pre,
	.realloc_post = early_realloc_post,
	.unmap_pre = early_unmap_pre,
	.unmap_post = early_unmap_post,
	.remap_post = early_remap_post,
	.before_exec = early_before_exec,
	.process_exit = early_process_exit,
};

void early_replay(void)
{
	uint32_t n = __atomic_exchange_n(&early_n, EARLY_CLOSED, __ATOMIC_ACQ_REL);
	if (n > EARLY_CAP)
		n = EARLY_CAP;
	if (!g_ready || g_off)
		return;
	const mt_sink *s = sink();
	for (uint32_t i = 0; i < n; i++) {
		early_t *e = &early_ev[i];
		// A slot is filled as soon as its call returns: another
		// thread preempted in between is waited for, briefly.
		for (int k = 0; k < 10000 && __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == E_EMPTY; k++)
			sched_yield();
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != E_FILLED)
			continue;
		const void *p = (const void *)(uintptr_t)e->ptr;
		mt_call_t c = {0};
		switch (e->op) {
		case MT_OP_FREE:
		case MT_OP_DELETE:
		case MT_OP_DELETE_ARR:
			s->free_pre(&c, p);
			s->free_post(&c, e->op, p);
			break;
		case MT_OP_MUNMAP:
			s->unmap_pre(&c, p);
			s->unmap_post(&c, p, (size_t)e->size, 1);
			break;
		default:
			s->alloc(e->op, e->size, p, e->kind);
		}
	}
}
