/* SPDX-License-Identifier: GPL-2.0 */
/* The DWARF stack walk over the agent's unwind tables (docs/unwind.md).
 * Part of memtrace.bpf.c, which includes it once, in order. */

/* The DWARF walk (--stack-depth without frame pointers). The agent fills
 * the tables: unwind_rows, unwind_ext and unwind_pages hold every file's
 * table (max_entries set before load), unwind_procs each process's
 * executable file mappings, unwind_files each table by file for a mapping
 * not written yet. unwind_dwarf 0 forces the kernel's frame-pointer walk. */
const volatile __u8 unwind_dwarf = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct mt_urow);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} unwind_pages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct mt_uext);
} unwind_ext SEC(".maps");

/* Allocated per process (24 KiB each), not preallocated for all. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct mt_umaps);
} unwind_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mt_ufile_key);
	__type(value, struct mt_ufile);
} unwind_files SEC(".maps");

/* Processes whose mappings the agent was asked to write again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} unwind_stale SEC(".maps");

/* Row CFA types and rules: unwind/row.go. */
#define MT_CFA_GAP 0
#define MT_CFA_SP 1
#define MT_CFA_FP 2
#define MT_CFA_PLT 3
#define MT_CFA_END 4
#define MT_CFA_UNSUPPORTED 5
#define MT_CFA_EXTENDED 6
#define MT_FP_UNCHANGED 0
#define MT_FP_AT_CFA 1
#define MT_FP_UNKNOWN 2
#define MT_RA_ARCH 0
#define MT_RA_AT_CFA 1
#define MT_RA_AFTER_FP 2
/* A frame pointer the fallback may follow is at most this far above sp. */
#define MT_FP_SANE (8ULL << 20)
#define MT_ARM64_PAC_MASK ((1ULL << 48) - 1)

struct mt_rule {
	__s64 cfa_off;
	__s64 fp_off;
	__s64 ra_off;
	__u8 type;
	__u8 sig;
	__u8 fp;
	__u8 ra_at; /* 1: at CFA + ra_off; 0: arm64's LR */
	__u8 plt;
};

/* A copy of the user stack from chunk_lo, made with one read: the walk's
 * reads of return addresses and saved frame pointers are served from it.
 * Each bpf_probe_read_user costs about as much for 8 bytes as for 1 KiB
 * (the fault-handling set-up, not the copy, dominates), and a 21-frame
 * walk made 25-40 of them (issue 14). */
#define MT_CHUNK 8192
#define MT_CHUNK_FILL 2048
struct mt_chunk {
	__u8 b[MT_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_chunk);
} stack_chunk SEC(".maps");

/* Decoded rules by (table, offset in it), direct-mapped, per CPU: the
 * same return addresses recur from stack to stack, and a hit is one
 * cache line where the page index, the binary search and the decode touch
 * several lines of a 32 MiB array. Tables are only appended to (the row
 * array is never rewritten), so an entry never goes stale. */
#define MT_RCACHE 512
struct mt_rcache_ent {
	__u64 key; /* 1 << 63 | row_first << 32 | offset; 0: empty */
	struct mt_rule r;
};

struct mt_rcache {
	struct mt_rcache_ent e[MT_RCACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rcache);
} rule_cache SEC(".maps");

/* The registers of the frame being unwound. */
struct mt_wstate {
	__u64 pc, sp, fp, lr;
	__u64 chunk_lo;  /* user address of the chunk's first byte */
	__u32 chunk_len; /* valid bytes in the chunk; 0: none */
	struct mt_umap cur; /* the last frame's mapping: callers are often in it too */
	__u8 have_cur;
	__u8 is_return; /* pc is a return address: its call is at pc - 1 */
	__u8 fp_known;
	__u8 lr_valid;
	__u8 fp_used;
#ifndef MT_COMPAT
	/* What mt_step's last step depended on, for the walk's reuse
	 * (wk_note): the stack words it read and their values, how it
	 * used the frame pointer (MT_WK_*), whether its mapping came from
	 * the VMA fallback. */
	__u8 nw;
	__u8 step_fp;
	__u8 cur_fb;
	__u64 wa[3], wv[3];
#endif
	/* mt_step's rule, here rather than on its frame: the walk's chain
	 * of calls must fit the verifier's 512 stack bytes with room to
	 * spare (tests/verifier_budget_test.go). */
	struct mt_rule rule;
};

struct mt_walk {
	struct mt_wstate s;
	__u32 n;
	__u16 reason;
#ifndef MT_COMPAT
	/* The reuse of the previous walk (mt_wk_pre): ks steps recorded
	 * in the new slot; kj the kept step the walk is level with; kr the
	 * kept step being replayed, -1 while walking; kbad: this walk is
	 * not to be kept. */
	__u32 ks;
	__u32 kj;
	__s32 kr;
	__u8 kbad;
	__u32 gen;  /* the process's mapping array's (mt_umaps.gen); 0: none */
	__u64 ktop; /* one above the highest stack word read */
#endif
};

#ifndef MT_COMPAT
/* The fp bits of a step (mt_wstate.step_fp). */
#define MT_WK_FP_READ 1 /* its CFA or frame record came from fp */
#define MT_WK_FP_SET 2  /* it gave fp a value read from the stack */
#define MT_WK_FP_USED 4 /* it set fp_used (the frame-pointer fallback) */
#define MT_WK_BAD 8     /* a signal frame: not replayed */
#define MT_WK_FB 16     /* its mapping came from the VMA fallback, not the array */
#define MT_WK_NOT_RUN 0xff

static __always_inline void wk_note(struct mt_wstate *w, __u64 addr, __u64 v)
{
	__u8 k = w->nw;
	if (k < 3) {
		w->wa[k] = addr;
		w->wv[k] = v;
		w->nw = k + 1;
	}
}
#define WK_NOTE(w, a, v) wk_note(w, a, v)
#define WK_FP(w, b) ((w)->step_fp |= (b))
#else
#define WK_NOTE(w, a, v) \
	do {             \
	} while (0)
#define WK_FP(w, b) \
	do {        \
	} while (0)
#endif

static __always_inline void arch_ra(struct mt_rule *r)
{
#if defined(__TARGET_ARCH_x86)
	r->ra_at = 1;
	r->ra_off = -8;
#else
	r->ra_at = 0;
#endif
}

/* Decodes a row as unwind.Row.Rule and Table.RowRule do. */
static __always_inline void decode_row(struct mt_urow *row, struct mt_utable *t, struct mt_rule *r)
{
	__u8 info = row->info;
	r->type = info & 7;
	r->sig = info & 8;
	if (r->type == MT_CFA_EXTENDED) {
		__u32 k = t->ext_first + row->cfa;
		struct mt_uext *e = row->cfa < t->ext_count ? bpf_map_lookup_elem(&unwind_ext, &k) : 0;
		if (!e) {
			r->type = MT_CFA_UNSUPPORTED;
			return;
		}
		r->type = e->info & 7;
		if (r->type != MT_CFA_SP && r->type != MT_CFA_FP && r->type != MT_CFA_PLT) {
			r->type = MT_CFA_UNSUPPORTED;
			return;
		}
		r->cfa_off = e->cfa_off;
		r->plt = e->plt;
		r->fp = (e->info >> 4) & 3;
		r->fp_off = e->fp_off;
		if ((e->info >> 6) == MT_RA_AT_CFA) {
			r->ra_at = 1;
			r->ra_off = e->ra_off;
		} else {
			arch_ra(r);
		}
		return;
	}
	if (r->type != MT_CFA_SP && r->type != MT_CFA_FP && r->type != MT_CFA_PLT)
		return;
	r->cfa_off = (__s64)row->cfa * 8;
	__s64 reg = (__s64)row->reg * 8;
	r->fp = MT_FP_UNCHANGED;
	if (r->type == MT_CFA_PLT) {
		r->plt = (__u8)row->reg;
		arch_ra(r);
		return;
	}
	__u8 fp = (info >> 4) & 3;
	switch (info >> 6) {
	case MT_RA_ARCH:
		arch_ra(r);
		r->fp = fp;
		r->fp_off = reg;
		break;
	case MT_RA_AT_CFA:
		r->ra_at = 1;
		r->ra_off = reg;
		r->fp = fp;
		break;
	case MT_RA_AFTER_FP:
		r->fp = MT_FP_AT_CFA;
		r->fp_off = reg;
		r->ra_at = 1;
		r->ra_off = reg + 8;
		break;
	default:
		r->type = MT_CFA_UNSUPPORTED;
	}
}

/* The rule at pc in mapping m: the page gives a few candidate rows, a
 * binary search the one whose range holds pc. The searches are global
 * functions, which the verifier checks once each rather than along every
 * path of the frame loop. */
MT_GLOBAL int mt_lookup_rule(struct mt_umap *m, __u64 pc, struct mt_rule *r)
{
	if (!m || !r)
		return 0;
	r->type = MT_CFA_GAP;
	r->sig = 0;
	__u64 off64 = pc - m->base;
	if (pc < m->base || off64 >> 32)
		return 0;
	__u32 off = off64;
	__u32 p = off >> MT_UPAGE_SHIFT;
	if (p >= m->t.page_count)
		return 0;
	__u32 zero = 0;
	struct mt_rcache *rc = bpf_map_lookup_elem(&rule_cache, &zero);
	__u64 key = 1ULL << 63 | (__u64)m->t.row_first << 32 | off;
	struct mt_rcache_ent *ce = 0;
	if (rc) {
		ce = &rc->e[(key * 0x9e3779b97f4a7c15ULL) >> 55 & (MT_RCACHE - 1)];
		if (ce->key == key) {
			*r = ce->r;
			return 1;
		}
	}
	__u32 k = m->t.page_first + p;
	__u64 *pe = bpf_map_lookup_elem(&unwind_pages, &k);
	if (!pe)
		return 0;
	__u32 lo = (__u32)*pe, hi = *pe >> 32;
	/* At most 4096 rows start in a page. */
	for (int i = 0; i < 13 && lo < hi; i++) {
		__u32 mid = (lo + hi + 1) / 2;
		k = m->t.row_first + mid;
		struct mt_urow *row = bpf_map_lookup_elem(&unwind_rows, &k);
		if (!row)
			return 0;
		if (row->pc <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	k = m->t.row_first + lo;
	struct mt_urow *row = lo < m->t.row_count ? bpf_map_lookup_elem(&unwind_rows, &k) : 0;
	if (!row || row->pc > off)
		return 0;
	decode_row(row, &m->t, r);
	if (ce) {
		ce->key = key;
		ce->r = *r;
	}
	return 1;
}

struct mt_fb_vma {
	struct mt_ufile_key key; /* the file's, as unwind_files is keyed */
	__u64 start, end, pgoff;
	int file;
};

#ifndef MT_COMPAT
static long fb_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct mt_fb_vma *c = data;
	struct file *f = BPF_CORE_READ(vma, vm_file);
	if (!f)
		return 0;
	c->file = 1;
	c->key.ino = BPF_CORE_READ(f, f_inode, i_ino);
	c->key.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	c->start = BPF_CORE_READ(vma, vm_start);
	c->end = BPF_CORE_READ(vma, vm_end);
	c->pgoff = BPF_CORE_READ(vma, vm_pgoff);
	return 0;
}
#endif

/* A PC in no mapping of the process's array: a library mapped since the
 * agent last wrote it (dlopen, or ld.so's work after exec). Its VMA names
 * the file, whose table may be built already; the agent is asked, once,
 * to write the mappings again. */
MT_GLOBAL int mt_fallback_map(__u64 pc, struct mt_umap *out)
{
	if (!out)
		return 0;
	struct mt_fb_vma c = {};
#ifndef MT_COMPAT
	if (bpf_find_vma(bpf_get_current_task_btf(), pc, fb_vma_cb, &c, 0) || !c.file)
		return 0;
#endif
	__u32 tgid = mt_pid_tgid() >> 32;
	__u8 one = 1;
	if (bpf_map_update_elem(&unwind_stale, &tgid, &one, BPF_NOEXIST) == 0) {
		struct mt_remap *rm = bpf_ringbuf_reserve(&events, sizeof(*rm), 0);
		if (rm) {
			rm->type = MT_REC_REMAP;
			rm->held = 0;
			rm->tgid = tgid;
			rm->hold_key = 0;
			bpf_ringbuf_submit(rm, BPF_RB_FORCE_WAKEUP);
		} else {
			bpf_map_delete_elem(&unwind_stale, &tgid);
		}
	}
#ifdef MT_COMPAT
	/* No bpf_find_vma (5.17): the remap request alone; the stack is cut
	 * here until the agent has written the process's mappings. */
	return 0;
#endif
	struct mt_ufile *uf = bpf_map_lookup_elem(&unwind_files, &c.key);
	if (!uf)
		return 0;
	__u64 foff = c.pgoff << 12;
	if (foff < uf->seg_off || foff >= uf->seg_end)
		return 0;
	out->start = c.start;
	out->end = c.end;
	out->base = c.start - foff + uf->delta;
	out->t = uf->t;
	return 1;
}

/* pc's mapping in a process's sorted array, copied into out. The agent
 * pads the array past n with entries that end above every user address,
 * so a branchless search over all MT_UMAPS entries finds the first that
 * ends above pc: with branches, the verifier would walk every path,
 * since an index added to a pointer must be tracked exactly. User
 * addresses are below 2^63, so a difference's sign is the comparison. */
MT_GLOBAL int mt_find_map(struct mt_umaps *ms, __u64 pc, struct mt_umap *out)
{
	if (!ms || !out)
		return 0;
	__u32 pos = 0;
#pragma unroll
	for (__u32 step = MT_UMAPS / 2; step > 0; step >>= 1) {
		/* The mask is what the verifier bounds the index by: clang
		 * drops it (pos's bits and step's are disjoint, so it adds
		 * with an OR) unless the barrier hides what pos holds, and
		 * 6.1's verifier bounds no OR of two unknown registers. */
		__u32 i = pos + step - 1;
		asm volatile("" : "+r"(i));
		__u64 end = ms->m[i & (MT_UMAPS - 1)].end;
		pos += step & (__u32)((__s64)(end - pc - 1) >> 63); /* end <= pc */
	}
	if (pos >= ms->n)
		return 0;
	asm volatile("" : "+r"(pos));
	struct mt_umap *m = &ms->m[pos & (MT_UMAPS - 1)];
	if (m->start > pc || pc >= m->end)
		return 0;
	*out = *m;
	return 1;
}

/* Copies the stack from addr into the chunk. A read that crosses into an
 * unmapped page fails whole, and the stack's top can be less than a chunk
 * below the end of its mapping: then the rest of addr's page only. */
static __always_inline void chunk_fill(struct mt_chunk *c, struct mt_wstate *w, __u64 addr)
{
	w->chunk_len = 0;
	if (bpf_probe_read_user(c->b, MT_CHUNK_FILL, (void *)addr) == 0) {
		w->chunk_lo = addr;
		w->chunk_len = MT_CHUNK_FILL;
		return;
	}
	__u32 n = 4096 - (addr & 4095);
	if (n > MT_CHUNK_FILL)
		n = MT_CHUNK_FILL;
	if (n >= 16 && bpf_probe_read_user(c->b, n, (void *)addr) == 0) {
		w->chunk_lo = addr;
		w->chunk_len = n;
	}
}

/* len (8 or 16) bytes of the stack at addr: from the chunk, or refilled
 * when addr is outside it, or with a read of their own where the chunk
 * cannot hold them. A refill starts up to MT_CHUNK_BELOW bytes below addr,
 * never below the frame's sp: the walk goes up the stack, but a step reads
 * the return address before the saved frame pointer beneath it (and
 * starting at addr made two fills of one frame, 3.5 M of sqlite3's 8.2 M
 * fills). */
#define MT_CHUNK_BELOW 256
static __always_inline int stack_read(struct mt_chunk *c, struct mt_wstate *w, __u64 *dst, const __u32 len, __u64 addr)
{
	if (c) {
		__u64 off = addr - w->chunk_lo;
		if (!(off < w->chunk_len && w->chunk_len - off >= len)) {
			__u64 lo = addr;
			if (addr >= w->sp)
				lo = addr - w->sp > MT_CHUNK_BELOW ? addr - MT_CHUNK_BELOW : w->sp;
			chunk_fill(c, w, lo);
			off = addr - w->chunk_lo;
		}
		if (off <= MT_CHUNK - len && off + len <= w->chunk_len) {
			dst[0] = *(__u64 *)(c->b + off);
			if (len == 16)
				dst[1] = *(__u64 *)(c->b + off + 8);
			return 1;
		}
	}
	return bpf_probe_read_user(dst, len, (void *)addr) == 0;
}

static __always_inline int step_stop(struct mt_wstate *w, int reason)
{
	if (w->fp_used && (reason == MT_STOP_NO_INFO || reason == MT_STOP_BAD_READ))
		return MT_STOP_FP;
	return reason;
}

/* One frame: from a frame's registers in w to its caller's. Returns 0
 * with the caller's PC in w->pc, or why the walk ends. A global
 * function: the verifier checks it once, not along every path of the
 * frame loop. */
MT_GLOBAL int mt_step(struct mt_wstate *w, struct mt_umaps *ms, struct mt_chunk *c)
{
	if (!w)
		return MT_STOP_BAD_READ;
	__u64 pc = w->pc, sp = w->sp, fp = w->fp;
#ifndef MT_COMPAT
	w->nw = 0;
	w->step_fp = 0;
#endif
	if (!(w->have_cur && pc >= w->cur.start && pc < w->cur.end)) {
		w->have_cur = ms && mt_find_map(ms, pc, &w->cur);
#ifndef MT_COMPAT
		w->cur_fb = 0;
#endif
		if (!w->have_cur) {
			w->have_cur = mt_fallback_map(pc, &w->cur);
#ifndef MT_COMPAT
			w->cur_fb = 1;
#endif
		}
	}
	struct mt_rule *rp = &w->rule;
	__builtin_memset(rp, 0, sizeof(*rp));
	int mapped = w->have_cur && w->cur.t.row_count;
	if (mapped)
		mt_lookup_rule(&w->cur, pc - w->is_return, rp);
	if (rp->sig) {
		/* A signal trampoline: the interrupted registers are in the
		 * sigcontext on the stack (unwind.SigAMD64RBP and the like). */
		/* One word at a time: a signal frame is rare, and an array
		 * of them on this frame put the fd programs' chain of calls
		 * over the verifier's 512 stack bytes on 6.1. */
		__u64 g = 0;
		WK_FP(w, MT_WK_BAD);
#if defined(__TARGET_ARCH_x86)
		__u64 gregs = sp + 40 + 10 * 8;
		if (bpf_probe_read_user(&g, 8, (void *)gregs))
			return step_stop(w, MT_STOP_BAD_READ);
		w->fp = g;
		if (bpf_probe_read_user(&g, 8, (void *)(gregs + 5 * 8)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->sp = g;
		if (bpf_probe_read_user(&g, 8, (void *)(gregs + 6 * 8)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->pc = g;
#else
		__u64 regs = sp + 128 + 176 + 8 + 29 * 8;
		if (bpf_probe_read_user(&g, 8, (void *)regs))
			return step_stop(w, MT_STOP_BAD_READ);
		w->fp = g;
		if (bpf_probe_read_user(&g, 8, (void *)(regs + 8)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->lr = g;
		if (bpf_probe_read_user(&g, 8, (void *)(regs + 16)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->sp = g;
		if (bpf_probe_read_user(&g, 8, (void *)(regs + 24)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->pc = g & MT_ARM64_PAC_MASK;
#endif
		w->fp_known = 1;
		w->lr_valid = 1;
		w->is_return = 0;
		return 0;
	}
	__u64 cfa = 0, ra = 0;
	switch (rp->type) {
	case MT_CFA_END:
		return MT_STOP_END;
	case MT_CFA_UNSUPPORTED:
		return step_stop(w, MT_STOP_NO_INFO);
	case MT_CFA_GAP: {
		/* No rule: the frame pointer, if it looks like one. */
		WK_FP(w, MT_WK_FP_READ);
		if (!w->fp_known)
			return step_stop(w, MT_STOP_NO_INFO);
		if (fp == 0)
			return mapped ? MT_STOP_END : step_stop(w, MT_STOP_NO_INFO);
		/* A value that cannot be a frame pointer is no frame pointer
		 * to follow: no unwind info, not a failed read (code built
		 * without CFI or frame pointers). */
		if (fp < sp || (fp & 7) || fp - sp > MT_FP_SANE)
			return step_stop(w, MT_STOP_NO_INFO);
		__u64 rec[2];
		if (!stack_read(c, w, rec, 16, fp))
			return step_stop(w, MT_STOP_BAD_READ);
		WK_NOTE(w, fp, rec[0]);
		WK_NOTE(w, fp + 8, rec[1]);
		WK_FP(w, MT_WK_FP_SET | MT_WK_FP_USED);
		cfa = fp + 16;
		ra = rec[1];
		w->fp = rec[0];
		w->fp_used = 1;
		break;
	}
	case MT_CFA_SP:
	case MT_CFA_FP:
	case MT_CFA_PLT:
		if (rp->type == MT_CFA_FP) {
			if (!w->fp_known)
				return step_stop(w, MT_STOP_NO_INFO);
			WK_FP(w, MT_WK_FP_READ);
			cfa = fp + rp->cfa_off;
		} else {
			cfa = sp + rp->cfa_off;
			if (rp->type == MT_CFA_PLT && (pc & 15) >= rp->plt)
				cfa += 8;
		}
		if (rp->ra_at && rp->fp == MT_FP_AT_CFA && rp->fp_off == rp->ra_off - 8) {
			/* The usual frame record: saved fp, then the return
			 * address, in one read. */
			__u64 rec[2];
			if (!stack_read(c, w, rec, 16, cfa + rp->fp_off))
				return step_stop(w, MT_STOP_BAD_READ);
			WK_NOTE(w, cfa + rp->fp_off, rec[0]);
			WK_NOTE(w, cfa + rp->fp_off + 8, rec[1]);
			WK_FP(w, MT_WK_FP_SET);
			w->fp = rec[0];
			ra = rec[1];
			break;
		}
		if (rp->ra_at) {
			if (!stack_read(c, w, &ra, 8, cfa + rp->ra_off))
				return step_stop(w, MT_STOP_BAD_READ);
			WK_NOTE(w, cfa + rp->ra_off, ra);
		} else {
			if (!w->lr_valid)
				return step_stop(w, MT_STOP_BAD_READ);
			ra = w->lr;
		}
		if (rp->fp == MT_FP_AT_CFA) {
			__u64 v;
			if (!stack_read(c, w, &v, 8, cfa + rp->fp_off))
				return step_stop(w, MT_STOP_BAD_READ);
			WK_NOTE(w, cfa + rp->fp_off, v);
			WK_FP(w, MT_WK_FP_SET);
			w->fp = v;
		} else if (rp->fp == MT_FP_UNKNOWN) {
			w->fp_known = 0;
		}
		break;
	default:
		return step_stop(w, MT_STOP_NO_INFO);
	}
	if (cfa < sp || (cfa == sp && !w->lr_valid))
		return step_stop(w, MT_STOP_BAD_READ);
#if defined(__TARGET_ARCH_arm64)
	ra &= MT_ARM64_PAC_MASK;
#endif
	if (ra == 0)
		return MT_STOP_END;
	w->sp = cfa;
	w->pc = ra;
	w->lr = ra;
	w->is_return = 1;
	w->lr_valid = 0;
	return 0;
}

/* The walk's state lives in a per-CPU map, not on the BPF stack: the fd
 * programs call the walk from a syscall-exit program whose own frame, with
 * the walk's and mt_step's, went past the 512 bytes the verifier allows a
 * chain of calls. bpf_loop's context must be on the stack, so it holds
 * the pointers (a pointer stored in a map reads back as a number). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_walk);
} walk_state SEC(".maps");

struct mt_walk_ref {
	struct mt_walk *w;
	struct stackbuf *buf;
	struct mt_umaps *maps;
	struct mt_chunk *chunk;
#ifndef MT_COMPAT
	struct mt_wkrec *keep; /* the allocation walks' only */
#endif
};

/* The reuse of the previous walk (docs/unwind.md). A step of the walk is
 * a function of its registers on entry (pc, sp, fp where a later step
 * reads it, lr where valid, is_return, lr_valid, fp_known), of the rule
 * for its pc (fixed by the mapping's base and table: tables are only
 * appended to) and of the stack words it reads. So the last walk kept
 * records every step's entry registers, mapping, words read with their
 * values, and outcome; a new walk that reaches a kept step with the same
 * registers replays the kept steps from there, each only after its
 * mapping is found again the same and its words are read again (from
 * the chunk, as the walk reads them) with the same values: the frames,
 * stop reason and registers are the ones the steps would give. A step
 * whose check fails is walked. The record is per CPU, not per thread:
 * which walk it holds only decides how often a replay is tried, never
 * what a replay gives. The compat build walks without it (the map is
 * there, unused: both builds have the same objects). */
struct mt_wkstep {
	__u64 pc, sp, fp, lr;
	__u64 base;
	__u64 wa[3], wv[3];
	__u32 row_first, row_count;
	__u8 st;  /* is_return | lr_valid << 1 | fp_known << 2 */
	__u8 out; /* the step's result; MT_WK_NOT_RUN: the state after a walk cut at its depth */
	__u8 nw;
	__u8 fpb; /* MT_WK_FP_* */
	__u32 pad;
};

#define MT_WK_STEPS 64
/* Kept steps looked at, at one step, to find the one level with it, and
 * to find fp unread (beyond: no replay there). */
#define MT_WK_SEEK 4
#define MT_WK_LIVE 8
struct mt_wkslot {
	__u32 n;
	__u32 ok;
	__u32 gen; /* the walk's mt_walk.gen */
	__u32 pad;
	struct mt_wkstep s[MT_WK_STEPS];
};

/* slot[cur] the walk kept, slot[cur ^ 1] the walk under way. */
struct mt_wkrec {
	__u32 cur;
	__u32 pad;
	/* One above the highest stack word the last walk read: how much of
	 * the stack the next walk reads at once (wk_prefetch). */
	__u64 top;
	/* Steps replayed and walked, for memtrace -v. */
	__u64 replayed;
	__u64 walked;
	struct mt_wkslot slot[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_wkrec);
} walk_keep SEC(".maps");

#ifndef MT_COMPAT

static __always_inline __u8 wk_st(struct mt_wstate *s)
{
	return (s->is_return & 1) | (s->lr_valid & 1) << 1 | (s->fp_known & 1) << 2;
}

/* Before a step: records its entry registers, and replays the kept
 * step it is level with if that is exact. Returns the step's result, or
 * -1 when the step is to be walked (mt_step, then mt_wk_post). */
MT_GLOBAL int mt_wk_pre(struct mt_walk *w, struct mt_wkrec *rec, struct mt_umaps *ms, struct mt_chunk *c)
{
	if (!w || !rec)
		return -1;
	__u32 cur = rec->cur & 1;
	struct mt_wkslot *old = &rec->slot[cur];
	struct mt_wkslot *neu = &rec->slot[cur ^ 1];
	struct mt_wstate *s = &w->s;
	__u32 k = w->ks;
	if (k >= MT_WK_STEPS) {
		w->kbad = 1;
		return -1;
	}
	struct mt_wkstep *e = &neu->s[k & (MT_WK_STEPS - 1)];
	e->pc = s->pc;
	e->sp = s->sp;
	e->fp = s->fp;
	e->lr = s->lr;
	e->st = wk_st(s);
	e->nw = 0;
	w->ks = k + 1;
	__u32 on = old->n;
	if (!old->ok || on > MT_WK_STEPS)
		return -1;
	__s32 r = w->kr;
	if (r < 0) {
		/* Steps are kept innermost first, their sp rising. A few
		 * each step (the verifier walks every iteration; kj goes on
		 * from there at the next step, which is only a replay missed). */
		__u32 j = w->kj;
		for (int i = 0; i < MT_WK_SEEK && j < on && old->s[j & (MT_WK_STEPS - 1)].sp < s->sp; i++)
			j++;
		w->kj = j;
		if (j >= on)
			return -1;
		struct mt_wkstep *o = &old->s[j & (MT_WK_STEPS - 1)];
		if (o->sp != s->sp || o->pc != s->pc || o->st != e->st || o->out == MT_WK_NOT_RUN)
			return -1;
		if (s->lr_valid && o->lr != s->lr)
			return -1;
		if (o->fp != s->fp) {
			/* fp differs: the kept steps must give it a value of their
			 * own before any of them reads it. */
			__u32 q = j;
			for (int i = 0; i < MT_WK_LIVE; i++, q++) {
				if (i == MT_WK_LIVE - 1)
					return -1;
				if (q >= on)
					return -1;
				struct mt_wkstep *x = &old->s[q & (MT_WK_STEPS - 1)];
				if (x->out == MT_WK_NOT_RUN || (x->fpb & MT_WK_FP_READ))
					return -1;
				if ((x->fpb & MT_WK_FP_SET) || x->out)
					break;
			}
		}
		r = j;
	}
	if ((__u32)r >= on) {
		w->kr = -1;
		return -1;
	}
	struct mt_wkstep *o = &old->s[r & (MT_WK_STEPS - 1)];
	if (o->out == MT_WK_NOT_RUN || (o->out == 0 && (__u32)r + 1 >= on)) {
		w->kr = -1;
		return -1;
	}
	/* The step's mapping. Within the array the kept walk searched (the
	 * same write of the agent's), the kept step's pc has the mapping it
	 * had then, unless that one came from the VMA fallback: no search. */
	__u8 fb = 0;
	if (!(w->gen && old->gen == w->gen && !(o->fpb & MT_WK_FB))) {
		__u64 pc = s->pc;
		if (!(s->have_cur && pc >= s->cur.start && pc < s->cur.end)) {
			s->have_cur = ms && mt_find_map(ms, pc, &s->cur);
			s->cur_fb = 0;
			if (!s->have_cur) {
				w->kr = -1;
				return -1;
			}
		}
		if (s->cur.base != o->base || s->cur.t.row_first != o->row_first ||
		    s->cur.t.row_count != o->row_count) {
			w->kr = -1;
			return -1;
		}
		fb = s->cur_fb ? MT_WK_FB : 0;
	}
	__u8 nw = o->nw;
	for (int i = 0; i < 3; i++) {
		if (i >= nw)
			break;
		__u64 v = 0;
		if (!stack_read(c, s, &v, 8, o->wa[i]) || v != o->wv[i]) {
			w->kr = -1;
			return -1;
		}
	}
	rec->replayed++;
	for (int i = 0; i < 3; i++) {
		if (i < nw && o->wa[i] + 8 > w->ktop)
			w->ktop = o->wa[i] + 8;
	}
	/* The step is the kept one: its record, with this walk's fp and lr. */
	__u64 fp0 = e->fp, lr0 = e->lr;
	*e = *o;
	e->fp = fp0;
	e->lr = lr0;
	e->fpb = (o->fpb & ~MT_WK_FB) | fb;
	if (o->fpb & MT_WK_FP_USED)
		s->fp_used = 1;
	if (o->out) {
		w->kr = -1;
		return o->out;
	}
	struct mt_wkstep *nx = &old->s[(r + 1) & (MT_WK_STEPS - 1)];
	s->pc = nx->pc;
	s->sp = nx->sp;
	s->lr = nx->lr;
	if (o->fpb & MT_WK_FP_SET)
		s->fp = nx->fp;
	s->is_return = nx->st & 1;
	s->lr_valid = (nx->st >> 1) & 1;
	s->fp_known = (nx->st >> 2) & 1;
	w->kr = r + 1;
	return 0;
}

/* After a step walked: what it read and gave, into the walk's record. */
MT_GLOBAL int mt_wk_post(struct mt_walk *w, struct mt_wkrec *rec, int stop)
{
	if (!w || !rec)
		return 0;
	rec->walked++;
	struct mt_wstate *s = &w->s;
	__u8 nw = s->nw;
	for (int i = 0; i < 3; i++) {
		if (i < nw && s->wa[i] + 8 > w->ktop)
			w->ktop = s->wa[i] + 8;
	}
	if (w->kbad)
		return 0;
	__u32 k = w->ks;
	if (k == 0 || k > MT_WK_STEPS)
		return 0;
	struct mt_wkstep *e = &rec->slot[(rec->cur & 1) ^ 1].s[(k - 1) & (MT_WK_STEPS - 1)];
	if (!s->have_cur || (s->step_fp & MT_WK_BAD)) {
		w->kbad = 1;
		return 0;
	}
	e->out = stop;
	e->fpb = s->step_fp | (s->cur_fb ? MT_WK_FB : 0);
	e->nw = s->nw;
	e->wa[0] = s->wa[0];
	e->wa[1] = s->wa[1];
	e->wa[2] = s->wa[2];
	e->wv[0] = s->wv[0];
	e->wv[1] = s->wv[1];
	e->wv[2] = s->wv[2];
	e->base = s->cur.base;
	e->row_first = s->cur.t.row_first;
	e->row_count = s->cur.t.row_count;
	return 0;
}

/* After the walk: keeps it if it ended at the outermost frame or was cut
 * at its depth (the registers after its last step recorded, so that a
 * replay goes on walking from there). */
static __always_inline void wk_end(struct mt_walk *w, struct mt_wkrec *rec)
{
	rec->top = w->ktop;
	__u32 k = w->ks;
	if (w->kbad || k == 0 || k > MT_WK_STEPS)
		return;
	__u32 cur = rec->cur & 1;
	struct mt_wkslot *neu = &rec->slot[cur ^ 1];
	__u8 out = neu->s[(k - 1) & (MT_WK_STEPS - 1)].out;
	if (out == 0) {
		if (k >= MT_WK_STEPS)
			return;
		struct mt_wkstep *e = &neu->s[k & (MT_WK_STEPS - 1)];
		e->pc = w->s.pc;
		e->sp = w->s.sp;
		e->fp = w->s.fp;
		e->lr = w->s.lr;
		e->st = wk_st(&w->s);
		e->out = MT_WK_NOT_RUN;
		e->nw = 0;
		e->fpb = 0;
		k++;
	} else if (out != MT_STOP_END) {
		return;
	}
	neu->n = k;
	neu->ok = 1;
	neu->gen = w->gen;
	rec->cur = cur ^ 1;
}
#endif

static long walk_cb(__u64 i, void *data)
{
	struct mt_walk_ref *ref = data;
	struct mt_walk *w = ref->w;
	if (!w || !ref->buf)
		return 1;
	if (w->n > MT_MAX_FRAMES) {
		w->reason = MT_STOP_DEPTH;
		return 1;
	}
	int stop = -1;
#ifndef MT_COMPAT
	if (ref->keep)
		stop = mt_wk_pre(w, ref->keep, ref->maps, ref->chunk);
	if (stop < 0) {
		stop = mt_step(&w->s, ref->maps, ref->chunk);
		if (ref->keep)
			mt_wk_post(w, ref->keep, stop);
	}
#else
	stop = mt_step(&w->s, ref->maps, ref->chunk);
#endif
	if (w->n >= stack_depth) {
		/* One step past the last frame kept: a stack of exactly
		 * stack_depth frames ends there and is complete, not cut. */
		w->reason = stop ? stop : MT_STOP_DEPTH;
		return 1;
	}
	if (stop) {
		w->reason = stop;
		return 1;
	}
	ref->buf->ips[w->n & MT_MAX_FRAMES] = w->s.pc;
	w->n++;
	return 0;
}

/* Sets ref up for a new walk from pc, sp, fp: the per-CPU state reset. */
static __always_inline struct mt_walk *walk_begin(struct mt_walk_ref *ref, struct stackbuf *buf, __u64 pc, __u64 sp,
						  __u64 fp)
{
	__u32 zero = 0;
	struct mt_walk *w = bpf_map_lookup_elem(&walk_state, &zero);
	if (!w)
		return 0;
	__u32 tgid = mt_pid_tgid() >> 32;
	__builtin_memset(w, 0, sizeof(*w));
	ref->w = w;
	ref->buf = buf;
	ref->maps = bpf_map_lookup_elem(&unwind_procs, &tgid);
	ref->chunk = bpf_map_lookup_elem(&stack_chunk, &zero);
	w->s.pc = pc;
	w->s.sp = sp;
	w->s.fp = fp;
	w->s.fp_known = 1;
	w->reason = MT_STOP_DEPTH;
#ifndef MT_COMPAT
	w->kr = -1;
#endif
	return w;
}

#ifdef MT_COMPAT
/* One frame of the walk, for kernels without bpf_loop: a global function
 * verified once, of scalars only (5.10 refuses pointers to a global
 * function), that finds the walk's state in the per-CPU maps. */
__noinline int mt_walk_frame(__u32 tgid)
{
	__u32 zero = 0;
	struct mt_walk_ref ref = {
		.w = bpf_map_lookup_elem(&walk_state, &zero),
		.buf = bpf_map_lookup_elem(&stack_scratch, &zero),
		.maps = bpf_map_lookup_elem(&unwind_procs, &tgid),
		.chunk = bpf_map_lookup_elem(&stack_chunk, &zero),
	};
	return walk_cb(0, &ref);
}

/* The frames of a walk begun with walk_begin (whose ref this frame loop
 * finds again by itself): a bounded loop of calls, cheap to verify. */
static __always_inline void mt_walk_frames(struct mt_walk_ref *ref)
{
	__u32 tgid = mt_pid_tgid() >> 32;
	for (__u32 i = 0; i < MT_MAX_FRAMES + 1; i++) {
		if (i >= stack_depth || mt_walk_frame(tgid))
			break;
	}
}
#else
#define mt_walk_frames(ref) bpf_loop(stack_depth, walk_cb, ref, 0)
#endif

/* The walk from the probe: at the allocation function's entry (before
 * any push) the caller's return address is at [sp] on x86-64 and in x30
 * on arm64, and the caller's frame pointer is untouched. */
static __always_inline __u32 dwarf_stack(struct pt_regs *ctx, struct stackbuf *buf, __u16 *reason)
{
	struct mt_walk_ref ref = {};
	struct mt_walk *w = walk_begin(&ref, buf, 0, 0, PT_REGS_FP(ctx));
	if (!w)
		return 0;
	w->s.is_return = 1;
	/* Read once: clang would otherwise load it at an offset computed
	 * from ctx, which the verifier refuses. */
	__u64 sp = PT_REGS_SP(ctx);
	asm volatile("" : "+r"(sp));
#ifndef MT_COMPAT
	__u32 zero = 0;
	ref.keep = bpf_map_lookup_elem(&walk_keep, &zero);
	w->gen = ref.maps ? ref.maps->gen : 0;
	if (ref.keep && ref.chunk) {
		/* The stack up to where the last walk read, in one read: a
		 * read costs about as much for 8 KiB as for 2 (its set-up,
		 * not the copy), and the walk, replayed or not, reads the
		 * same words again. */
		__u64 top = ref.keep->top;
		if (top > sp + MT_CHUNK_FILL && top - sp <= MT_CHUNK) {
			__u32 n = top - sp;
			if (n <= MT_CHUNK && bpf_probe_read_user(ref.chunk->b, n, (void *)sp) == 0) {
				w->s.chunk_lo = sp;
				w->s.chunk_len = n;
			}
		}
	}
#endif
#if defined(__TARGET_ARCH_x86)
	w->s.sp = sp;
	if (!stack_read(ref.chunk, &w->s, &w->s.pc, 8, sp))
		return 0;
	w->s.sp = sp + 8;
#else
	w->s.pc = ctx->regs[30] & MT_ARM64_PAC_MASK;
	w->s.sp = sp;
#endif
	buf->ips[0] = w->s.pc;
	w->n = 1;
	/* stack_depth - 1 steps for the frames, one more to see whether
	 * the last of them is the outermost. */
	mt_walk_frames(&ref);
#ifndef MT_COMPAT
	if (ref.keep)
		wk_end(w, ref.keep);
#endif
	*reason = w->reason;
	return w->n;
}
