// stack.c: the walks both modes' stacks come from (stack.h). Per event
// the traced thread does no symbol lookup: the binary mode sends
// addresses with their file and offset (modules.c's cached table), and the
// text mode names each distinct PC once (the frame cache below).
#include "stack.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include "modules.h"

// bt_walk: backtrace(), where the rows do not cover the stack. n frames
// past the library's own, one more than wanted if there are more.
static int bt_walk(mt_rawframe *out, int max, int *stop)
{
	void *pcs[128 + 24];
	// Room for the library's own frames, which are left out, and one
	// more to tell a stack of exactly max frames from a longer one.
	int want = max + 24;
	if (want > (int)(sizeof pcs / sizeof pcs[0]))
		want = (int)(sizeof pcs / sizeof pcs[0]);
	int got = backtrace(pcs, want);
	int n = 0;
	*stop = MT_STOP_END;
	for (int i = 0; i < got; i++) {
		uintptr_t a = (uintptr_t)pcs[i];
		// A return address: its call is at a - 1 (the call may be the
		// last instruction of its segment).
		const mt_seg *s = modules_find(i ? a - 1 : a);
		if (s && s->self)
			continue;
		if (n == max) {
			*stop = MT_STOP_DEPTH;
			break;
		}
		out[n].addr = a;
		out[n].off = s && s->file != MT_NO_FILE ? a - s->adj : 0;
		out[n].file = s ? s->file : MT_NO_FILE;
		n++;
	}
	if (got == want && *stop == MT_STOP_END)
		*stop = MT_STOP_DEPTH; // backtrace() was cut, not finished
#if defined(__arm__)
	// backtrace() ended in the library's own frames: the hook's caller
	// has no unwind entry (mt.h, t_caller), and the unwinder leaves out
	// the frame it cannot step past. That frame is the caller, and the
	// stack is cut there, not ended.
	if (n == 0 && got < want && max > 0 && t_caller) {
		const mt_seg *s = modules_find(t_caller - 1);
		if (!(s && s->self)) {
			out[0].addr = t_caller;
			out[0].off = s && s->file != MT_NO_FILE ? t_caller - s->adj : 0;
			out[0].file = s ? s->file : MT_NO_FILE;
			n = 1;
			*stop = MT_STOP_NO_INFO;
		}
	}
#endif
	return n;
}

int stack_raw(mt_rawframe *out, int *stop, int *by_rows, unsigned *gen, int *reused, uint64_t **memo)
{
	int max = stack_depth > 128 ? 128 : stack_depth;
	*gen = 0;
	int checked = 0;
	for (int tries = 0; tries < 3; tries++) {
		unsigned seq = checked ? modules_check() : modules_begin();
		*reused = 0;
		*memo = NULL;
		unsigned misses = modules_misses();
		int n = walk_backtrace ? -1 : walk_rows(out, max, stop, seq, reused, memo);
		// A PC in no segment of a table taken without asking the
		// loader: a library loaded since (walk again over the new
		// table), or code of no file (the loader says nothing new,
		// and the walk stands).
		if (n < 0 && !checked && modules_misses() != misses) {
			checked = 1;
			if (modules_check() != seq)
				continue;
		}
		*by_rows = n >= 0;
		if (n < 0)
			n = bt_walk(out, max, stop);
		if (!checked && modules_misses() != misses) {
			checked = 1;
			if (modules_check() != seq)
				continue;
		}
		if (modules_still(seq)) {
			*gen = seq;
			return n;
		}
		*memo = NULL;
		if (tries == 2)
			return n;
	}
	return 0;
}

// ---------------------------------------------------------------------------
// The text mode's frame cache: PC -> what dladdr says, direct-mapped,
// bounded (FC_SIZE entries, mapped at the first stack), shared by the
// threads. An entry is written under its own sequence number (odd while
// written; a writer that finds it odd does not wait, it skips the
// insert), and read without a lock: a reader whose entry changed under
// it resolves the PC itself. Entries are of one generation of the
// loader's objects: names of an unloaded library are never reused.

#define FC_SIZE 16384

typedef struct {
	unsigned seq;
	int self;
	uint64_t gen;
	uintptr_t pc, off;
	const char *mod, *sym;
} fc_entry;

static fc_entry *fc;
static spin_t fc_init_lock;

static void resolve_pc(uintptr_t a, mt_frame *f, int *self)
{
	Dl_info info;
	struct link_map *lm = NULL;
	*f = (mt_frame){a, 0, NULL, NULL};
	*self = 0;
	if (!dladdr1((void *)a, &info, (void **)&lm, RTLD_DL_LINKMAP))
		return;
	if ((uintptr_t)info.dli_fbase == self_base) {
		*self = 1;
		return;
	}
	if (info.dli_fname && info.dli_fname[0]) {
		f->mod = info.dli_fname;
		if (info.dli_sname && info.dli_saddr) {
			f->sym = info.dli_sname;
			f->off = a - (uintptr_t)info.dli_saddr;
		} else {
			f->off = a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)info.dli_fbase);
		}
	}
}

static void fc_lookup(uintptr_t a, uint64_t gen, mt_frame *f, int *self)
{
	if (UNLIKELY(!fc)) {
		spin_lock(&fc_init_lock);
		if (!fc)
			__atomic_store_n(&fc, raw_map(FC_SIZE * sizeof(fc_entry)), __ATOMIC_RELEASE);
		spin_unlock(&fc_init_lock);
		if (!fc) {
			resolve_pc(a, f, self);
			return;
		}
	}
	uintptr_t h = (a ^ (a >> 13) ^ (a >> 29)) * 0x9e3779b1u;
	fc_entry *e = &fc[(h >> 7) & (FC_SIZE - 1)];
	unsigned s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (!(s & 1) && e->pc == a && e->gen == gen) {
		mt_frame g = {a, e->off, e->mod, e->sym};
		int sf = e->self;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s) {
			*f = g;
			*self = sf;
			return;
		}
	}
	resolve_pc(a, f, self);
	if (s & 1 || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	e->pc = a;
	e->gen = gen;
	e->off = f->off;
	e->mod = f->mod;
	e->sym = f->sym;
	e->self = *self;
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

void stack_walk(void (*fn)(void *ctx, const mt_frame *f), void *ctx)
{
	mt_rawframe raw[128];
	int stop;
	int max = stack_depth > 128 ? 128 : stack_depth;
	unsigned seq = modules_begin();
	uint64_t gen = modules_generation();
	int n = bt_walk(raw, max, &stop);
	(void)seq;
	for (int i = 0; i < n; i++) {
		mt_frame f;
		int self;
		fc_lookup((uintptr_t)raw[i].addr, gen, &f, &self);
		if (!self)
			fn(ctx, &f);
	}
}
