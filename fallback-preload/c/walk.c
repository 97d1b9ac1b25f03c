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

__attribute__((noinline)) int walk_rows(mt_rawframe *out, int max, int *stop)
{
	uintptr_t pc, sp, fp, lr = 0;
#if defined(__x86_64__)
	__asm__ __volatile__("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(fp));
#else
	__asm__ __volatile__("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"
			     : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
#endif
	bounds_t b = {sp, walk_stack_top()};
	if (b.hi <= b.lo || b.hi - b.lo > ((uintptr_t)1 << 30))
		return -1;
	int n = 0, is_return = 0, lr_valid = 1, fp_known = 1;
	unsigned gen = (unsigned)modules_generation();
	for (int steps = 0; steps < 512; steps++) {
		uintptr_t q = is_return ? pc - 1 : pc;
		rc_entry e;
		if (!find_rule(q, gen, &e))
			return -1;
		if (!e.self) {
			if (n == max) {
				*stop = MT_STOP_DEPTH;
				return n;
			}
			out[n].addr = pc;
			out[n].off = pc - e.adj;
			out[n].file = e.file;
			n++;
		}
		const rule_t r = e.r;
		if (r.signal) {
			uintptr_t npc, nsp, nfp, nlr;
			if (!rd(&b, sp + SIG_PC, &npc) || !rd(&b, sp + SIG_SP, &nsp) || !rd(&b, sp + SIG_FP, &nfp) ||
			    !rd(&b, sp + SIG_LR, &nlr))
				return -1;
#if defined(__aarch64__)
			npc &= PAC_MASK;
#endif
			if (nsp < sp)
				return -1;
			pc = npc;
			sp = nsp;
			fp = nfp;
			lr = nlr;
			fp_known = lr_valid = 1;
			is_return = 0;
			continue;
		}
		uintptr_t cfa, ra;
		switch (r.cfa) {
		case MT_CFA_END:
			*stop = MT_STOP_END;
			return n;
		case MT_CFA_SP:
			cfa = sp + (uintptr_t)r.cfa_off;
			break;
		case MT_CFA_FP:
			if (!fp_known)
				return -1;
			cfa = fp + (uintptr_t)r.cfa_off;
			break;
		case MT_CFA_PLT:
			cfa = sp + (uintptr_t)r.cfa_off + ((pc & 15) >= r.plt ? 8 : 0);
			break;
		default:
			return -1;
		}
		if (cfa < sp || (cfa == sp && !lr_valid))
			return -1;
		if (r.ra_in_lr) {
			if (!lr_valid)
				return -1;
			ra = lr;
		} else if (!rd(&b, cfa + (uintptr_t)r.ra_off, &ra)) {
			return -1;
		}
		if (r.fp_rule == 1) {
			if (!rd(&b, cfa + (uintptr_t)r.fp_off, &fp))
				return -1;
		} else if (r.fp_rule == 2) {
			fp_known = 0;
		}
#if defined(__aarch64__)
		ra &= PAC_MASK;
#endif
		if (ra == 0) {
			*stop = MT_STOP_END;
			return n;
		}
		sp = cfa;
		pc = lr = ra;
		is_return = 1;
		lr_valid = 0;
	}
	return -1;
}

#else

uintptr_t walk_stack_top(void)
{
	return 0;
}

int walk_rows(mt_rawframe *out, int max, int *stop)
{
	// 32-bit ARM unwinds through .ARM.exidx, which the rows do not
	// describe: backtrace() it is.
	(void)out;
	(void)max;
	(void)stop;
	return -1;
}

#endif
