// walk.c: the DWARF stack walk over memtrace's unwind rows (walk.h). It
// is unwind.WalkDetailed (Go, the reference the BPF walker is held to)
// in C, but for what it cannot do: where the Go walker falls back to the
// frame pointer (a PC without CFI) or stops short (an unsupported rule, a
// failed read), this one gives up and the caller takes backtrace(), so
// that a stack is never cut or guessed where glibc's unwinder would have
// gone on.
//
// Safety: every stack read lies between the stack pointer at the walk's
// start and the top of the thread's stack (pthread_getattr_np, once per
// thread), so a corrupt rule or frame can make the walk give up but never
// fault; a thread running on another stack (sigaltstack, a coroutine)
// gives up at once. Rows are read only inside the region, bounds checked.
#include "walk.h"

#include "modules.h"
#include "shm.h"

#if defined(__x86_64__) || defined(__aarch64__)

#if defined(__x86_64__)
#define MY_ARCH MT_ARCH_AMD64
// The interrupted registers in the signal frame, from the SP at
// __restore_rt (unwind.SigAMD64*).
#define SIG_PC (40 + 16 * 8)
#define SIG_SP (40 + 15 * 8)
#define SIG_FP (40 + 10 * 8)
#define SIG_LR SIG_PC
#else
#define MY_ARCH MT_ARCH_ARM64
#define SIG_FP (128 + 176 + 8 + 29 * 8)
#define SIG_LR (128 + 176 + 8 + 30 * 8)
#define SIG_SP (128 + 176 + 8 + 31 * 8)
#define SIG_PC (128 + 176 + 8 + 32 * 8)
#define PAC_MASK ((1ull << 48) - 1)
#endif

static __thread uintptr_t t_stack_hi TLS_IE;
static __thread int t_stack_known TLS_IE; // 1 known, -1 unknowable

uintptr_t walk_stack_top(void)
{
	if (LIKELY(t_stack_known > 0))
		return t_stack_hi;
	if (t_stack_known < 0)
		return 0;
	pthread_attr_t a;
	void *addr = NULL;
	size_t size = 0;
	t_stack_known = -1;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr && size) {
			t_stack_hi = (uintptr_t)addr + size;
			t_stack_known = 1;
		}
		pthread_attr_destroy(&a);
	}
	return t_stack_known > 0 ? t_stack_hi : 0;
}

typedef struct {
	uintptr_t lo, hi; // readable words lie in [lo, hi)
} bounds_t;

static inline int rd(const bounds_t *b, uintptr_t a, uintptr_t *v)
{
	if (a < b->lo || a > b->hi - sizeof(uintptr_t) || (a & (sizeof(uintptr_t) - 1)))
		return 0;
	*v = *(const uintptr_t *)a;
	return 1;
}

// A row decoded (unwind.Rule).
typedef struct {
	int cfa, signal, fp_rule, ra_in_lr;
	int64_t cfa_off, fp_off, ra_off;
	unsigned plt;
} rule_t;

static int decode_ext(const mt_file *f, unsigned idx, int signal, rule_t *r)
{
	if (idx >= f->n_ext)
		return 0;
	const uint8_t *e = shm_span(f->ext_off, (uint64_t)f->n_ext * MT_EXT_SIZE);
	if (!e)
		return 0;
	e += (size_t)idx * MT_EXT_SIZE;
	int32_t co, fo, ro;
	memcpy(&co, e, 4);
	memcpy(&fo, e + 4, 4);
	memcpy(&ro, e + 8, 4);
	uint8_t info = e[12];
	r->signal = signal || (info & 8);
	r->cfa = info & 7;
	if (r->cfa != MT_CFA_SP && r->cfa != MT_CFA_FP && r->cfa != MT_CFA_PLT)
		return 0;
	r->cfa_off = co;
	r->plt = e[13];
	r->fp_rule = (info >> 4) & 3;
	r->fp_off = fo;
	if (((info >> 6) & 3) == 1) {
		r->ra_in_lr = 0;
		r->ra_off = ro;
	} else {
		r->ra_in_lr = MY_ARCH == MT_ARCH_ARM64;
		r->ra_off = -8;
	}
	return 1;
}

// lookup finds the rule at ELF vaddr v of file f: 0 where the rows say
// nothing usable (the caller gives up), else 1.
static int lookup(const mt_file *f, uintptr_t v, rule_t *r)
{
	if (v < f->base || v - f->base > 0xffffffffu)
		return 0;
	uint32_t off = (uint32_t)(v - f->base);
	uint32_t n = f->n_rows;
	const uint8_t *rows = shm_span(f->rows_off, (uint64_t)n * MT_ROW_SIZE);
	if (!rows || n == 0)
		return 0;
	// The last row whose pc <= off.
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint32_t pc;
		memcpy(&pc, rows + (size_t)mid * MT_ROW_SIZE, 4);
		if (pc > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == 0)
		return 0;
	const uint8_t *row = rows + (size_t)(lo - 1) * MT_ROW_SIZE;
	uint16_t cfa;
	memcpy(&cfa, row + 4, 2);
	uint8_t info = row[6];
	int8_t reg = (int8_t)row[7];
	memset(r, 0, sizeof *r);
	r->signal = (info & 8) != 0;
	r->cfa = info & 7;
	if (r->signal)
		return 1;
	switch (r->cfa) {
	case MT_CFA_END:
		return 1;
	case MT_CFA_EXTENDED:
		return decode_ext(f, cfa, 0, r);
	case MT_CFA_SP:
	case MT_CFA_FP:
	case MT_CFA_PLT:
		break;
	default:
		return 0; // a gap (no FDE) or an unsupported rule
	}
	r->cfa_off = (int64_t)cfa * 8;
	r->ra_in_lr = MY_ARCH == MT_ARCH_ARM64;
	r->ra_off = -8;
	if (r->cfa == MT_CFA_PLT) {
		r->plt = (uint8_t)reg;
		return 1;
	}
	int64_t rg = (int64_t)reg * 8;
	int fp = (info >> 4) & 3;
	switch ((info >> 6) & 3) {
	case 0:
		r->fp_rule = fp;
		if (fp == 1)
			r->fp_off = rg;
		break;
	case 1:
		r->ra_in_lr = 0;
		r->ra_off = rg;
		r->fp_rule = fp;
		break;
	case 2:
		r->fp_rule = 1;
		r->fp_off = rg;
		r->ra_in_lr = 0;
		r->ra_off = rg + 8;
		break;
	default:
		return 0;
	}
	return 1;
}

// The rule cache: what a PC's lookup found (its segment's file and
// offset, and the decoded row), direct-mapped, shared by the threads and
// keyed on the module table's generation. Stacks repeat: most frames are
// found here, without the two binary searches. Entries are written under
// their own sequence number (odd while written) and read without a lock:
// a reader that sees it change looks the PC up itself.
#define RC_SIZE 8192

typedef struct {
	unsigned seq, gen;
	uintptr_t q, adj, bias;
	uint32_t file, self;
	rule_t r;
} rc_entry;

static rc_entry *rc;
static spin_t rc_init_lock;

static rc_entry *rc_slot(uintptr_t q)
{
	if (UNLIKELY(!rc)) {
		spin_lock(&rc_init_lock);
		if (!rc)
			__atomic_store_n(&rc, raw_map(RC_SIZE * sizeof(rc_entry)), __ATOMIC_RELEASE);
		spin_unlock(&rc_init_lock);
		if (!rc)
			return NULL;
	}
	uintptr_t h = (q ^ (q >> 15)) * (uintptr_t)0x9e3779b97f4a7c15ull;
	return &rc[(h >> (sizeof(uintptr_t) * 8 - 13)) & (RC_SIZE - 1)];
}

// find_rule fills *e with q's segment and rule: 0 where the rows cannot
// say (the caller gives up).
static int find_rule(uintptr_t q, unsigned gen, rc_entry *e)
{
	rc_entry *c = rc_slot(q);
	unsigned s = 1;
	if (LIKELY(c != NULL)) {
		s = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		if (!(s & 1) && c->q == q && c->gen == gen) {
			*e = *c;
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == s)
				return 1;
		}
	}
	const mt_seg *sg = modules_find(q);
	if (!sg || sg->file == MT_NO_FILE)
		return 0;
	e->q = q;
	e->gen = gen;
	e->adj = sg->adj;
	e->bias = sg->bias;
	e->file = sg->file;
	e->self = sg->self;
	const mt_file *f = shm_file(sg->file);
	if (!f)
		return 0;
	uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
	if (st == MT_FILE_ASKED)
		st = shm_wait_file(sg->file);
	if (st != MT_FILE_READY || f->arch != MY_ARCH || !lookup(f, q - sg->bias, &e->r))
		return 0;
	if (c && !(s & 1) && __atomic_compare_exchange_n(&c->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		c->q = e->q;
		c->gen = e->gen;
		c->adj = e->adj;
		c->bias = e->bias;
		c->file = e->file;
		c->self = e->self;
		c->r = e->r;
		__atomic_store_n(&c->seq, s + 2, __ATOMIC_RELEASE);
	}
	return 1;
}

// ---------------------------------------------------------------------------
// Reuse of the thread's previous walk. Most of a stack is the previous
// event's: the same outer frames, walked again step by step. A step is a
// function of its state (pc, sp, fp, lr, is_return, lr_valid, fp_known),
// of the rule for its pc (fixed while the module table's generation is,
// since a file's rows never change once READY) and of the stack words it
// reads. So each thread keeps its last walks that succeeded (WR_KEPT of
// them, one per place a walk starts from, wr_pick): every step's
// state on entry, the frame it gave, and the words it read with their
// values. A new walk that reaches a kept step's sp with the same state
// (in what the rest of that walk depends on: fp and lr are often
// overwritten before any use), under the same generation, while every
// word the kept walk read from that step on still holds its value (read
// again, bounds checked like any read), would repeat the kept walk from
// there: its frames are copied instead. The depth limit is the new walk's:
// a kept walk cut at its limit is reused only where the copy reaches the
// new limit, since what lay beyond the cut is not known.
//
// The record is per thread, in the library's own memory: a slot of a
// bounded pool, claimed at the thread's first walk, given back when the
// thread ends (walk_thread_exit) and, in a forked child, for every thread
// but the forking one (walk_atfork_child). A walk that finds the record in
// use (a signal handler's, inside a walk) neither reads nor writes it.

// Steps and reads of a kept walk: more than a walk of 128 frames takes
// (the library's own frames and a signal frame's four reads included);
// a longer walk is not kept.
#define WR_STEPS 192
#define WR_READS 384
#define WR_THREADS 1024
#define WR_RULES 64

// A step's flags: its state on entry, what it did, and, set when the walk
// is kept, which of the entry state the rest of the walk depends on.
#define WS_RETURN 0x001   // is_return
#define WS_LR_VALID 0x002 // lr_valid
#define WS_FP_KNOWN 0x004 // fp_known
#define WS_FRAME 0x008    // it gave a frame
#define WS_USE_FP 0x010   // its CFA was fp's
#define WS_USE_LR 0x020   // lr or lr_valid decided something
#define WS_SET_FP 0x040   // fp was overwritten (restored, a signal frame)
#define WS_SET_FPK 0x080  // fp_known was overwritten (a signal frame, fp_rule 2)
#define WS_LIVE_FP 0x100
#define WS_LIVE_FPK 0x200
#define WS_LIVE_LR 0x400

typedef struct {
	uintptr_t pc, sp, fp, lr;
	uint64_t off; // the frame's, with WS_FRAME
	uint32_t file;
	uint16_t flags;
	// Kept: the reads (frames) of this step and of the steps outside it.
	// Under way: the reads made before this step.
	uint16_t nrd, nfr;
	// Kept: the lowest address of those reads (their highest lies under
	// the thread's stack top, which does not move).
	uintptr_t rmin;
} wstep;

// A read: the word's address and value. RD_FP in addr marks a read of fp
// (the caller's saved frame pointer) in the walk under way: one whose
// value the rest of the walk never uses (fp is overwritten first) is not
// kept, so a match does not read it again: a frame pointer the code uses
// as a register holds anything, and its saved copy changes from call to
// call.
#define RD_FP ((uintptr_t)1)

typedef struct {
	uintptr_t addr, val;
} wread;

// A kept walk: st[0] is its outermost step, st[n - 1] its first.
typedef struct {
	int n;   // kept steps
	int cut; // it stopped at its depth limit in st[0]
	unsigned gen;
	unsigned used; // the record's clock when it was last matched or kept
	uintptr_t caller; // t_caller at its walk
	// The caller's word about the frames a walk reusing every kept
	// step gives (walk_rows' memo): 0 whenever they may have changed.
	uint64_t memo;
	wstep st[WR_STEPS];
	wread rd[WR_READS];
	// The frames, outermost first: step i's, where it gave one, is
	// fr[st[i].nfr - 1], so that a reuse copies them without going
	// over the steps that gave none (the library's own).
	mt_rawframe fr[WR_STEPS];
} wkept;

// Kept walks per thread: the walks of a few call paths (a loop's malloc
// and its free start from different hooks, at different stack depths)
// each kept apart, so that they do not evict each other's.
#define WR_KEPT 4

typedef struct {
	int busy; // a walk uses the record
	unsigned clock;
	wkept k[WR_KEPT];
	wstep cur[WR_STEPS]; // the walk under way, in its order
	wread cur_rd[WR_READS];
	// The thread's own rule cache, in front of the shared one (seq 1:
	// filled): the library's frames and the innermost ones come back at
	// every walk, and the shared cache's lines are often not at hand.
	rc_entry rules[WR_RULES];
} wrec;

static wrec *wr_pool[WR_THREADS];
static int wr_owned[WR_THREADS];
static __thread wrec *t_wrec TLS_IE;
static __thread int t_wslot TLS_IE;
static __thread int t_wstate TLS_IE; // 0 no record yet, 1 t_wrec, -1 none for good

// wr_claim gives the thread a record, once: a thread that finds the pool
// full walks without one.
static wrec *wr_claim(void)
{
	// First, so that a signal handler's walk meanwhile claims nothing.
	t_wstate = -1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (int i = 0; i < WR_THREADS; i++) {
		int want = 0;
		if (__atomic_load_n(&wr_owned[i], __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&wr_owned[i], &want, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		wrec *w = __atomic_load_n(&wr_pool[i], __ATOMIC_ACQUIRE);
		if (!w) {
			w = raw_map(sizeof(wrec));
			if (!w) {
				__atomic_store_n(&wr_owned[i], 0, __ATOMIC_RELEASE);
				return NULL;
			}
			__atomic_store_n(&wr_pool[i], w, __ATOMIC_RELEASE);
		}
		// Another thread's walks, of another stack: never to be matched.
		for (int k = 0; k < WR_KEPT; k++) {
			w->k[k].n = 0;
			w->k[k].memo = 0;
		}
		w->busy = 0;
		t_wslot = i;
		t_wrec = w;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t_wstate = 1;
		return w;
	}
	return NULL;
}

void walk_thread_exit(void)
{
	// The TLS destructors that run after this one may still allocate:
	// their walks take no record.
	wrec *w = t_wrec;
	t_wstate = -1;
	t_wrec = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (w)
		__atomic_store_n(&wr_owned[t_wslot], 0, __ATOMIC_RELEASE);
}

void walk_atfork_child(void)
{
	for (int i = 0; i < WR_THREADS; i++)
		if (!t_wrec || i != t_wslot)
			wr_owned[i] = 0;
}

// wr_pick chooses the kept walk a walk starting at (pc, sp) is matched
// against and kept in: the one that started there too, from the same
// hook's caller (t_caller), else the one matched or kept longest ago.
static ALWAYS_INLINE wkept *wr_pick(wrec *w, uintptr_t pc, uintptr_t sp, unsigned gen)
{
	uintptr_t caller = t_caller;
	wkept *old = &w->k[0];
	for (int i = 0; i < WR_KEPT; i++) {
		wkept *k = &w->k[i];
		if (k->n > 0 && k->gen == gen && k->caller == caller && k->st[k->n - 1].sp == sp &&
		    k->st[k->n - 1].pc == pc) {
			old = k;
			break;
		}
		if ((int)(k->used - old->used) < 0)
			old = k;
	}
	old->used = ++w->clock;
	old->caller = caller;
	return old;
}

// wr_live sets a kept step's live flags from its own and from the live
// flags of the step after it (outside it); it returns its own.
static ALWAYS_INLINE unsigned wr_live(wstep *x, unsigned next)
{
	unsigned f = x->flags & ~(unsigned)(WS_LIVE_FP | WS_LIVE_FPK | WS_LIVE_LR);
	unsigned l = 0;
	// After fp_rule 2 the value of fp no longer matters: fp_known stays
	// 0 until a signal frame sets both.
	if ((f & WS_USE_FP) || (!(f & (WS_SET_FP | WS_SET_FPK)) && (next & WS_LIVE_FP)))
		l |= WS_LIVE_FP;
	if ((f & WS_USE_FP) || (!(f & WS_SET_FPK) && (next & WS_LIVE_FPK)))
		l |= WS_LIVE_FPK;
	// Every step but the last sets lr and lr_valid.
	if (f & WS_USE_LR)
		l |= WS_LIVE_LR;
	x->flags = (uint16_t)(f | l);
	return l;
}

// wr_keep makes the walk under way kept walk k: its first nstep steps,
// with nread reads, then k's steps from `from` outwards; from -1: the walk
// under way is whole, of generation gen, cut at its depth limit or not.
// Where it does not fit, the old walk stays: it is still a walk that was.
static void wr_keep(const wrec *w, wkept *k, int nstep, int nread, int from, unsigned gen, int cut)
{
	int base = from + 1;
	int rbase = from >= 0 ? k->st[from].nrd : 0, fbase = from >= 0 ? k->st[from].nfr : 0;
	if (base + nstep > WR_STEPS || rbase + nread > WR_READS)
		return;
	k->memo = 0;
	if (from < 0) {
		k->gen = gen;
		k->cut = cut;
	}
	unsigned live = from >= 0 ? k->st[from].flags : 0;
	uintptr_t rmin = from >= 0 ? k->st[from].rmin : UINTPTR_MAX;
	int nr = rbase, nf = fbase;
	for (int i = nstep - 1; i >= 0; i--) {
		const wstep *c = &w->cur[i];
		wstep *x = &k->st[base + (nstep - 1 - i)];
		int end = i + 1 < nstep ? w->cur[i + 1].nrd : nread;
		// live: the entry state of the step after this one, which
		// an fp read of this one sets.
		for (int r = c->nrd; r < end; r++) {
			wread v = w->cur_rd[r];
			if (v.addr & RD_FP) {
				if (!(live & WS_LIVE_FP))
					continue; // its value is never used: not read again
				v.addr &= ~RD_FP;
			}
			if (v.addr < rmin)
				rmin = v.addr;
			k->rd[nr++] = v;
		}
		*x = *c;
		if (x->flags & WS_FRAME) {
			k->fr[nf].addr = x->pc;
			k->fr[nf].off = x->off;
			k->fr[nf].file = x->file;
			nf++;
		}
		x->nrd = (uint16_t)nr;
		x->nfr = (uint16_t)nf;
		x->rmin = rmin;
		live = wr_live(x, live);
	}
	k->n = base + nstep;
}

// wr_same says whether the walk's state equals the kept step's in what
// the kept walk's rest depends on.
static ALWAYS_INLINE int wr_same(const wstep *x, uintptr_t pc, uintptr_t fp, uintptr_t lr, int is_return, int lr_valid,
				 int fp_known)
{
	unsigned f = x->flags;
	if (x->pc != pc || !(f & WS_RETURN) != !is_return)
		return 0;
	if ((f & WS_LIVE_FP) && x->fp != fp)
		return 0;
	if ((f & WS_LIVE_FPK) && !(f & WS_FP_KNOWN) != !fp_known)
		return 0;
	if ((f & WS_LIVE_LR) && (x->lr != lr || !(f & WS_LR_VALID) != !lr_valid))
		return 0;
	return 1;
}

// The walk under way: its registers and flags, its frames, and what the
// record keeps of it (w NULL: nothing is kept nor matched).
typedef struct {
	const bounds_t *b;
	uintptr_t pc, sp, fp, lr;
	int is_return, lr_valid, fp_known;
	int n, max, steps, nread;
	unsigned gen, seq;
	mt_rawframe *out;
	wrec *w;
	wkept *k;
	wstep *cs; // the step under way in w->cur, NULL when not kept
	// The kept walk: j its innermost step not below sp. Its reads were
	// found to hold from step 0 to good, and not at step bad.
	int j, good, bad;
	uint64_t **memo;
} walk_t;

// wk_read reads a word of the stack for the step under way, and notes it
// with the step when the walk is kept: 0 where the read is out of bounds.
static ALWAYS_INLINE int wk_read(walk_t *s, uintptr_t a, uintptr_t *v, uintptr_t is_fp)
{
	if (!rd(s->b, a, v))
		return 0;
	if (s->cs) {
		if (s->nread == WR_READS) {
			s->w = NULL;
			s->cs = NULL;
		} else {
			s->w->cur_rd[s->nread].addr = a | is_fp;
			s->w->cur_rd[s->nread++].val = *v;
		}
	}
	return 1;
}

// wk_reads_hold says whether the kept walk's reads still hold from its
// outermost step to step c. Where one changed, the step that made it is
// ruled out, with every step inside it. The reads were aligned and on
// this thread's stack when made; the new walk's bounds are checked with
// one comparison each.
static ALWAYS_INLINE int wk_reads_hold(walk_t *s, int c)
{
	const wkept *k = s->k;
	if (c >= s->bad)
		return 0;
	if (c <= s->good)
		return 1;
	uintptr_t lo = s->b->lo, span = s->b->hi - lo - sizeof(uintptr_t);
	int i = s->good >= 0 ? k->st[s->good].nrd : 0, end = k->st[c].nrd;
	if (k->st[c].rmin >= lo) {
		// All within the bounds: none below the walk's start, and each
		// was under the thread's stack top, which does not move, and
		// aligned when it was made.
		for (; i < end; i++)
			if (*(const uintptr_t *)k->rd[i].addr != k->rd[i].val)
				break;
	} else {
		for (; i < end; i++) {
			uintptr_t a = k->rd[i].addr;
			if (a - lo > span || *(const uintptr_t *)a != k->rd[i].val)
				break;
		}
	}
	if (i == end) {
		s->good = c;
		return 1;
	}
	// Read i is of the innermost step whose reads go past it.
	int r = s->good + 1;
	while (k->st[r].nrd <= i)
		r++;
	s->bad = r;
	s->good = r - 1;
	return 0;
}

// wk_reuse copies the kept walk's frames from a step with the walk's
// state on outwards, where there is one whose reads still hold: it
// returns the frame count, else -1 (walk on).
static int wk_reuse(walk_t *s, int *stop, int *reused)
{
	const wkept *k = s->k;
	while (s->j >= 0 && k->st[s->j].sp < s->sp)
		s->j--;
	for (int c = s->j; c >= 0 && k->st[c].sp == s->sp; c--) {
		if (s->steps + c >= 512 ||
		    !wr_same(&k->st[c], s->pc, s->fp, s->lr, s->is_return, s->lr_valid, s->fp_known) ||
		    !wk_reads_hold(s, c))
			continue;
		if (k->cut && s->n + k->st[c].nfr < s->max)
			continue;
		int n0 = s->n, cut = k->cut, whole = s->steps == 0 && c == k->n - 1;
		int nfr = (int)k->st[c].nfr;
		if (s->n + nfr <= s->max) {
			for (int f = nfr - 1; f >= 0; f--)
				s->out[s->n++] = k->fr[f];
		} else {
			for (int f = nfr - 1; f >= 0; f--) {
				if (s->n == s->max) {
					cut = 1;
					break;
				}
				s->out[s->n++] = k->fr[f];
			}
		}
		*stop = cut ? MT_STOP_DEPTH : MT_STOP_END;
		*reused = s->n - n0;
		// A walk over a table rebuilt meanwhile is dropped by the
		// caller, and not kept either.
		if (modules_still(s->seq)) {
			// Every step the kept walk's, which stays as it was: the
			// same frames as at the walks that reused it whole before,
			// the depth limit being the process's.
			if (whole)
				*s->memo = &s->k->memo;
			else
				wr_keep(s->w, s->k, s->steps, s->nread, c, s->gen, cut);
		}
		return s->n;
	}
	return -1;
}

// wk_rule finds the rule for the walk's pc, through the thread's own
// cache when there is a record: NULL where the rows cannot say.
static ALWAYS_INLINE const rc_entry *wk_rule(walk_t *s, rc_entry *local)
{
	uintptr_t q = s->is_return ? s->pc - 1 : s->pc;
	if (!s->w)
		return find_rule(q, s->gen, local) ? local : NULL;
	rc_entry *m = &s->w->rules[(q ^ (q >> 7)) & (WR_RULES - 1)];
	if (m->seq != 1 || m->q != q || m->gen != s->gen) {
		if (!find_rule(q, s->gen, m)) {
			m->seq = 0;
			return NULL;
		}
		m->seq = 1;
	}
	return m;
}

// wk_signal steps over a signal frame: 0 where its words cannot be read.
static int wk_signal(walk_t *s)
{
	uintptr_t npc, nsp, nfp, nlr;
	if (!wk_read(s, s->sp + SIG_PC, &npc, 0) || !wk_read(s, s->sp + SIG_SP, &nsp, 0) ||
	    !wk_read(s, s->sp + SIG_FP, &nfp, RD_FP) || !wk_read(s, s->sp + SIG_LR, &nlr, 0))
		return 0;
#if defined(__aarch64__)
	npc &= PAC_MASK;
#endif
	if (nsp < s->sp)
		return 0;
	if (s->cs)
		s->cs->flags |= WS_SET_FP | WS_SET_FPK;
	s->pc = npc;
	s->sp = nsp;
	s->fp = nfp;
	s->lr = nlr;
	s->fp_known = s->lr_valid = 1;
	s->is_return = 0;
	return 1;
}

// wk_step applies rule r to the walk's registers: 1 the walk goes on,
// 0 it reached the outermost frame, -1 it gives up.
static ALWAYS_INLINE int wk_step(walk_t *s, const rule_t *r)
{
	uintptr_t cfa, ra;
	if (r->signal)
		return wk_signal(s) ? 1 : -1;
	switch (r->cfa) {
	case MT_CFA_END:
		return 0;
	case MT_CFA_SP:
		cfa = s->sp + (uintptr_t)r->cfa_off;
		break;
	case MT_CFA_FP:
		if (s->cs)
			s->cs->flags |= WS_USE_FP;
		if (!s->fp_known)
			return -1;
		cfa = s->fp + (uintptr_t)r->cfa_off;
		break;
	case MT_CFA_PLT:
		cfa = s->sp + (uintptr_t)r->cfa_off + ((s->pc & 15) >= r->plt ? 8 : 0);
		break;
	default:
		return -1;
	}
	if (cfa == s->sp && s->cs)
		s->cs->flags |= WS_USE_LR;
	if (cfa < s->sp || (cfa == s->sp && !s->lr_valid))
		return -1;
	if (r->ra_in_lr) {
		if (s->cs)
			s->cs->flags |= WS_USE_LR;
		if (!s->lr_valid)
			return -1;
		ra = s->lr;
	} else if (!wk_read(s, cfa + (uintptr_t)r->ra_off, &ra, 0)) {
		return -1;
	}
	if (r->fp_rule == 1) {
		if (!wk_read(s, cfa + (uintptr_t)r->fp_off, &s->fp, RD_FP))
			return -1;
		if (s->cs)
			s->cs->flags |= WS_SET_FP;
	} else if (r->fp_rule == 2) {
		s->fp_known = 0;
		if (s->cs)
			s->cs->flags |= WS_SET_FPK;
	}
#if defined(__aarch64__)
	ra &= PAC_MASK;
#endif
	if (ra == 0)
		return 0;
	s->sp = cfa;
	s->pc = s->lr = ra;
	s->is_return = 1;
	s->lr_valid = 0;
	return 1;
}

// wk_begin opens step `steps` in the record: its entry state.
static ALWAYS_INLINE void wk_begin(walk_t *s)
{
	wstep *cs = s->cs = &s->w->cur[s->steps];
	cs->pc = s->pc;
	cs->sp = s->sp;
	cs->fp = s->fp;
	cs->lr = s->lr;
	cs->flags = (uint16_t)((s->is_return ? WS_RETURN : 0) | (s->lr_valid ? WS_LR_VALID : 0) |
			       (s->fp_known ? WS_FP_KNOWN : 0));
	cs->nrd = (uint16_t)s->nread;
}

// wk_end ends the walk with its frames, keeping it (its first `steps`
// steps) where it was kept all along.
static ALWAYS_INLINE int wk_end(walk_t *s, int steps, int cut)
{
	if (s->cs && modules_still(s->seq))
		wr_keep(s->w, s->k, steps, s->nread, -1, s->gen, cut);
	return s->n;
}

static ALWAYS_INLINE int walk(walk_t *s, int *stop, int *reused)
{
	for (s->steps = 0; s->steps < 512; s->steps++) {
		s->cs = NULL;
		if (s->w && s->steps == WR_STEPS)
			s->w = NULL;
		if (s->w) {
			int n = wk_reuse(s, stop, reused);
			if (n >= 0)
				return n;
			wk_begin(s);
		}
		rc_entry local;
		const rc_entry *e = wk_rule(s, &local);
		if (!e)
			return -1;
		if (!e->self) {
			if (s->n == s->max) {
				*stop = MT_STOP_DEPTH;
				return wk_end(s, s->steps + 1, 1);
			}
			s->out[s->n].addr = s->pc;
			s->out[s->n].off = s->pc - e->adj;
			s->out[s->n].file = e->file;
			if (s->cs) {
				s->cs->flags |= WS_FRAME;
				s->cs->off = s->pc - e->adj;
				s->cs->file = e->file;
			}
			s->n++;
		}
		const rule_t r = e->r;
		int go = wk_step(s, &r);
		if (go < 0)
			return -1;
		if (go == 0) {
			*stop = MT_STOP_END;
			return wk_end(s, s->steps + 1, 0);
		}
	}
	return -1;
}

__attribute__((noinline)) int walk_rows(mt_rawframe *out, int max, int *stop, unsigned seq, int *reused,
					uint64_t **memo)
{
	uintptr_t pc, sp, fp, lr = 0;
#if defined(__x86_64__)
	__asm__ __volatile__("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(fp));
#else
	__asm__ __volatile__("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"
			     : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
#endif
	*reused = 0;
	*memo = NULL;
	bounds_t b = {sp, LIKELY(t_stack_known > 0) ? t_stack_hi : walk_stack_top()};
	if (b.hi < b.lo + sizeof(uintptr_t) || b.hi - b.lo > ((uintptr_t)1 << 30))
		return -1;
	wrec *w = t_wrec;
	if (UNLIKELY(!w) && t_wstate == 0)
		w = wr_claim();
	if (w && w->busy)
		w = NULL;
	walk_t s = {.b = &b,
		    .pc = pc,
		    .sp = sp,
		    .fp = fp,
		    .lr = lr,
		    .lr_valid = 1,
		    .fp_known = 1,
		    .max = max,
		    .seq = seq,
		    .out = out,
		    .w = w,
		    .j = -1,
		    .good = -1,
		    .bad = WR_STEPS,
		    .memo = memo};
	s.gen = (unsigned)modules_generation();
	if (w) {
		w->busy = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		s.k = wr_pick(w, pc, sp, s.gen);
		s.j = s.k->gen == s.gen ? s.k->n - 1 : -1;
	}
	int n = walk(&s, stop, reused);
	if (w) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		w->busy = 0;
	}
	return n;
}

#else

uintptr_t walk_stack_top(void)
{
	return 0;
}

int walk_rows(mt_rawframe *out, int max, int *stop, unsigned seq, int *reused, uint64_t **memo)
{
	// 32-bit ARM unwinds through .ARM.exidx, which the rows do not
	// describe: backtrace() it is.
	(void)out;
	(void)max;
	(void)stop;
	(void)seq;
	*reused = 0;
	*memo = NULL;
	return -1;
}

void walk_thread_exit(void)
{
}

void walk_atfork_child(void)
{
}

#endif
