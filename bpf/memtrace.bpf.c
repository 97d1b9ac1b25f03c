// SPDX-License-Identifier: GPL-2.0
/* memtrace's kernel side: uprobes on the allocation functions, per-thread
 * nesting so that allocator-internal calls are logged once, a process filter
 * and one ring buffer with batched wake-ups; stacks walked in BPF over the
 * agent's DWARF unwind tables or by frame pointers; the process records and
 * the holds. One concern a part, included here once, in order:
 *   mt_state.h    settings, the ring, the filter, per-thread call state
 *   mt_ring.h     thread records and events (packed and full), wake-ups
 *   mt_frames.h   which threads walk (--stack-threads), stack and file records
 *   mt_dwarf.h    the DWARF walk (docs/unwind.md)
 *   mt_fp.h       the frame-pointer walk (--stack-unwind fp)
 *   mt_capture.h  the capture at the outermost call: walk, id, sent once
 *   mt_sample.h   --sample: the per-thread countdown, the live sampled blocks
 *   (this file)   the allocation probes: entry, return, free, operator new
 *   mt_proc.h     thread names, fork/exec/exit records, holds (docs/holds.md)
 * bpf/memtrace.h is the ABI with the Go side.
 */
#if defined(__TARGET_ARCH_x86)
#include "x86/vmlinux.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arm64/vmlinux.h"
#else
#error "memtrace's BPF side supports x86 and arm64"
#endif
#include "bpf/bpf_helpers.h"
#include "bpf/bpf_tracing.h"
#include "bpf/bpf_core_read.h"
#include "memtrace.h"

char LICENSE[] SEC("license") = "GPL";

/* kfunc of session uprobes (Linux 6.13+); weak, so older kernels load. */
extern bool bpf_session_is_return(void) __ksym __weak;

#include "mt_state.h"
#include "mt_ring.h"

/* mmap, munmap and mremap called from inside libc (malloc's own mmap, a
 * thread stack) are not the program's calls. The return address sits at
 * [sp] at the probe point (before any push) on x86-64, in the link
 * register on arm64 (read from [sp] there, a thread stack's munmap after
 * a join was logged as the program's), and the cookie carries how far
 * the module's text extends before and after the probe, so the test needs
 * no per-process state and has no window before the agent knows where libc
 * was mapped. */
static __always_inline int called_from_module(struct pt_regs *ctx, __u64 cookie)
{
	__u64 before = MT_CK(cookie, BEFORE);
	__u64 after = MT_CK(cookie, AFTER);
	if (before == 0 && after == 0)
		return 0;
	__u64 ret = 0;
#if defined(__TARGET_ARCH_x86)
	bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx));
#else
	ret = PT_REGS_RET(ctx) & ((1ULL << 48) - 1);
#endif
	__u64 ip = PT_REGS_IP(ctx);
	return ret >= ip - before && ret < ip + after;
}

#include "mt_frames.h"
#include "mt_dwarf.h"
#include "mt_fp.h"
#include "mt_capture.h"
#include "mt_sample.h"

/* aligned_alloc and memalign are one function in glibc, so one probe
 * serves both; which name the program called shows in the call that got
 * there: a call rel32 (x86-64) or a bl (arm64) to a PLT stub of the
 * caller's module. The stub is
 * sent as (inode, file offset), found through the VMA now, so that the
 * agent can name it later even if the process has exited by then. */
struct vma_ctx {
	__u64 addr;
	__u64 fileoff;
	__u64 ino;
};

#ifndef MT_COMPAT
static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_ctx *c = data;
	struct file *f = BPF_CORE_READ(vma, vm_file);
	if (!f)
		return 0;
	c->ino = BPF_CORE_READ(f, f_inode, i_ino);
	c->fileoff = c->addr - BPF_CORE_READ(vma, vm_start) + (BPF_CORE_READ(vma, vm_pgoff) << 12);
	return 0;
}
#endif

static __always_inline void find_call_target(struct pt_regs *ctx, __u64 *off, __u64 *ino)
{
	*off = 0;
	*ino = 0;
#if defined(__TARGET_ARCH_x86)
	__u64 ret = 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)))
		return;
	__u8 insn[5];
	if (bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)) || insn[0] != 0xe8)
		return;
	__s32 rel = insn[1] | insn[2] << 8 | insn[3] << 16 | (__u32)insn[4] << 24;
	struct vma_ctx c = {.addr = ret + (__s64)rel};
#else
	/* A bl: 100101 and a signed 26-bit count of words from itself. */
	__u64 ret = PT_REGS_RET(ctx) & ((1ULL << 48) - 1);
	__u32 insn = 0;
	if (bpf_probe_read_user(&insn, sizeof(insn), (void *)(ret - 4)) || (insn >> 26) != 0x25)
		return;
	__s64 words = (__s64)((__u64)(insn & 0x3ffffff) << 38) >> 38;
	struct vma_ctx c = {.addr = ret - 4 + words * 4};
#endif
	/* find_vma only try-locks the mm; when another thread holds it, the
	 * absolute address goes instead (callsite_ino = -1) and the agent
	 * names it from its record of the process's mappings. */
#ifdef MT_COMPAT
	/* No bpf_find_vma (5.17): always the absolute address. */
	if (1) {
#else
	if (bpf_find_vma(bpf_get_current_task_btf(), c.addr, vma_cb, &c, 0) || !c.ino) {
#endif
		*off = c.addr;
		*ino = (__u64)-1;
		return;
	}
	*off = c.fileoff;
	*ino = c.ino;
}

static __always_inline void call_target(struct pt_regs *ctx, struct tstate *st)
{
	find_call_target(ctx, &st->callsite, &st->callsite_ino);
}

/* The return address of a call at its probe point: at [sp] on x86 (no
 * push yet), in the link register on arm64. */
static __always_inline __u64 caller_ra(struct pt_regs *ctx)
{
#if defined(__TARGET_ARCH_x86)
	__u64 ret = 0;
	bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx));
	return ret;
#else
	return PT_REGS_RET(ctx);
#endif
}

struct ino_ctx {
	__u64 ino, lo, hi;
};

#ifndef MT_COMPAT
static long ino_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct ino_ctx *c = data;
	struct file *f = BPF_CORE_READ(vma, vm_file);
	if (f)
		c->ino = BPF_CORE_READ(f, f_inode, i_ino);
	c->lo = BPF_CORE_READ(vma, vm_start);
	c->hi = BPF_CORE_READ(vma, vm_end);
	return 0;
}
#endif

/* An allocator library's own mmap, munmap or mremap (jemalloc's extents,
 * tcmalloc's spans, mimalloc's segments) is not the program's, as
 * malloc's own mmap in libc is not (called_from_module): its caller lies
 * in the text of a library in alloc_inos. A range once found is kept per
 * process, so the next test is two compares. */
static __always_inline int from_allocator(struct pt_regs *ctx)
{
	if (!alloc_libs)
		return 0;
	__u64 ra = caller_ra(ctx);
	if (!ra)
		return 0;
	__u32 tgid = mt_pid_tgid() >> 32;
	struct alloc_text *at = bpf_map_lookup_elem(&alloc_texts, &tgid);
	if (at) {
		for (int i = 0; i < MT_ALLOC_RANGES; i++)
			if (ra >= at->lo[i] && ra < at->hi[i])
				return 1;
	}
	struct ino_ctx c = {};
#ifdef MT_COMPAT
	/* No bpf_find_vma (5.17): only the ranges the agent wrote
	 * (tracer/compat.go) are known. */
	return 0;
#else
	if (bpf_find_vma(bpf_get_current_task_btf(), ra, ino_cb, &c, 0) || !c.ino)
		return 0;
#endif
	if (!bpf_map_lookup_elem(&alloc_inos, &c.ino))
		return 0;
	if (!at) {
		static const struct alloc_text zero = {};
		bpf_map_update_elem(&alloc_texts, &tgid, &zero, BPF_NOEXIST);
		at = bpf_map_lookup_elem(&alloc_texts, &tgid);
	}
	if (at) {
		int slot = at->hi[0] ? 1 : 0;
		at->lo[slot] = c.lo;
		at->hi[slot] = c.hi;
	}
	return 1;
}

/* strdup's size when no inner malloc told it (mimalloc's mi_strdup calls
 * its heap's allocator, which is not probed): the copy's length with its
 * NUL, read 64 bytes at a time. */
struct strlen_ctx {
	__u64 p, n;
};

static long strlen_cb(__u64 i, void *data)
{
	struct strlen_ctx *c = data;
	char buf[64];
	long r = bpf_probe_read_user_str(buf, sizeof(buf), (void *)(c->p + c->n));
	if (r <= 0) {
		c->n = 0;
		return 1;
	}
	if (r < (long)sizeof(buf)) {
		c->n += r;
		return 1;
	}
	/* 63 bytes and the NUL the helper put: the string may go on. */
	c->n += sizeof(buf) - 1;
	return 0;
}

static __always_inline __u64 strlen_user(__u64 p)
{
	struct strlen_ctx c = {.p = p};
	/* The compat build's bound: strings up to 4 KiB. */
#ifdef MT_COMPAT
	mt_loop(1 << 16, 64, strlen_cb, &c);
#else
	bpf_loop(1 << 16, strlen_cb, &c, 0);
#endif
	return c.n;
}

/* Whether the operator new marked in st is still running: its return
 * address is still where its call put it. A new left by an exception
 * (bad_alloc, caught by the program) never returned, and a later call
 * from a deeper frame must not be taken for one made inside it (jemalloc's
 * first aligned new was logged with the size of an earlier plain new). */
static __always_inline int ovr_live(struct pt_regs *ctx, struct tstate *st, __u64 sp)
{
	if (!st->ovr_op)
		return 0;
	if (sp > st->ovr_sp) {
		st->ovr_op = 0;
		return 0;
	}
#if defined(__TARGET_ARCH_x86)
	__u64 ra = 0;
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)st->ovr_sp) || ra != st->ovr_ret) {
		st->ovr_op = 0;
		return 0;
	}
	return 1;
#else
	/* A bl leaves the return address in x30, which the new keeps in its
	 * frame record, below its entry sp (reading it at that sp, as on
	 * x86-64, found something else: every new was logged as the malloc
	 * it calls). At the same sp (new[] tail-calling new) it is x30
	 * itself; deeper, one of the records of the frame-pointer chain
	 * between here and the new's entry sp. */
	if (sp == st->ovr_sp) {
		if ((PT_REGS_RET(ctx) & MT_ARM64_PAC_MASK) == (st->ovr_ret & MT_ARM64_PAC_MASK))
			return 1;
		st->ovr_op = 0;
		return 0;
	}
	__u64 fp = PT_REGS_FP(ctx);
	for (int i = 0; i < 4; i++) {
		__u64 rec[2] = {};
		if (fp < sp || fp >= st->ovr_sp || (fp & 7) || bpf_probe_read_user(rec, sizeof(rec), (void *)fp))
			break;
		if ((rec[1] & MT_ARM64_PAC_MASK) == (st->ovr_ret & MT_ARM64_PAC_MASK))
			return 1;
		fp = rec[0];
	}
	st->ovr_op = 0;
	return 0;
#endif
}

/* The uprobe programs do not consult the targets map: every link is
 * PID-filtered, so the kernel runs them for the traced processes only (a
 * forked child's inherited breakpoints are removed on its first hit).
 * Returns 1 where the call needs no return probe, which on session probes
 * (can_skip) the kernel then does not place. */
static __always_inline int do_enter(struct pt_regs *ctx, const int can_skip)
{
	__u64 cookie = mt_cookie(ctx);
	__u8 op = MT_CK(cookie, OP);
	__u8 sig = MT_CK(cookie, SIG);
	struct tstate *st = state(1);
	if (!st)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	/* A nested call runs on a deeper (or, for a tail call, the same)
	 * stack; a shallower one means the outer call was left by longjmp or
	 * an exception and never returned. */
	if (st->depth > 0 && sp > st->outer_sp)
		st->depth = 0;
	if (st->depth > 0) {
		if (st->depth == 1 && sig == MT_SIG_SIZE0 && op == MT_OP_MALLOC && st->sig == MT_SIG_STRDUP)
			st->inner_size = PT_REGS_PARM1(ctx);
		st->depth++;
		return 0;
	}
	/* A delete whose allocator frees without calling free (jemalloc,
	 * tcmalloc, mimalloc) leaves its mark; the program allocating again
	 * means that delete is over. */
	st->skip_free_ptr = 0;
	__u64 size = 0, ptr = 0;
	__u8 flags = 0;
	switch (sig) {
	case MT_SIG_SIZE0:
	case MT_SIG_NEW_ALIGNED:
		size = PT_REGS_PARM1(ctx);
		break;
	case MT_SIG_CALLOC:
		size = PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_REALLOC:
		ptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_REALLOCARRAY:
		ptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM2(ctx) * PT_REGS_PARM3(ctx);
		break;
	case MT_SIG_ALIGN_SIZE:
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_POSIX_MEMALIGN:
		ptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM3(ctx);
		break;
	case MT_SIG_XALLOCX:
		ptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_MMAP:
		if (called_from_module(ctx, cookie) || from_allocator(ctx))
			return 0;
		/* File mappings are not logged, but the agent must know them
		 * to leave their munmap out too. */
		if (!(PT_REGS_PARM4(ctx) & MT_MAP_ANONYMOUS))
			flags = MT_FLAG_FILE;
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_MREMAP: {
		if (called_from_module(ctx, cookie) || from_allocator(ctx))
			return 0;
		ptr = PT_REGS_PARM1(ctx);
		st->inner_size = PT_REGS_PARM2(ctx);
		size = PT_REGS_PARM3(ctx);
		break;
	}
	}
	/* The allocation an operator new makes for the program: logged as
	 * the new, with the size the program asked for, and new's stack. */
	/* An allocation smaller than the new asked for is not its block (the
	 * exception a failing new throws is malloc'ed inside it): it is
	 * logged as itself, and the new stays marked for its return probe.
	 * (libstdc++ allocates 1 byte for new(0), and rounds an aligned
	 * new's size up to the alignment: never less.) */
	int under_new = 0;
	if (st->ovr_op) {
		if (sp >= st->ovr_sp) {
			st->ovr_op = 0;
		} else if (size >= st->ovr_size && sig != MT_SIG_MMAP && sig != MT_SIG_MREMAP &&
			   ovr_live(ctx, st, sp)) {
			op = st->ovr_op;
			size = st->ovr_size;
			st->stack = st->ovr_stack;
			under_new = 1;
			st->ovr_op = 0;
		}
	}
	/* --sample: an allocation that is not a sample walks nothing; its
	 * return only looks for a sampled block it frees (realloc). */
	st->sampled = 1;
	if (sample_rate) {
		if (under_new) {
			st->sampled = st->ovr_sampled;
		} else {
			__u64 n = size;
			if (sig == MT_SIG_STRDUP) {
				n = strlen_user(PT_REGS_PARM1(ctx));
				if (op == MT_OP_STRNDUP && n > PT_REGS_PARM2(ctx))
					n = PT_REGS_PARM2(ctx);
				n++;
			}
			st->sampled = mt_sample_take(st, n);
		}
	}
	/* --sample: a malloc or calloc that is no sample has nothing for its
	 * return to do, so it asks for none: it costs its entry's trap only,
	 * not the return's too. Its depth stays 0, which takes it to call no
	 * other probed function inside (as libc's and the probed allocators'
	 * malloc and calloc do not: their other names alias them, and their
	 * own work is internal calls), since one would be counted down again
	 * as an outermost call. Not realloc, whose old block may be a sample
	 * and which may call malloc inside (glibc's realloc(NULL, n)), nor
	 * the aligned ones (glibc's memalign calls malloc for small
	 * alignments). */
	if (can_skip && !st->sampled && (sig == MT_SIG_SIZE0 || sig == MT_SIG_CALLOC)) {
		__u8 cop = MT_CK(mt_cookie(ctx), OP);
		if (cop == MT_OP_MALLOC || cop == MT_OP_CALLOC)
			return 1;
	}
	st->callsite_ino = 0;
	if (!st->sampled) {
		st->stack = 0;
	} else if (under_new) {
		st->callsite = st->ovr_callsite;
		st->callsite_ino = st->ovr_callsite_ino;
	} else {
		st->stack = capture_stack(ctx, st);
		if (op == MT_OP_ALIGNED_ALLOC || (sig != MT_SIG_MMAP && sig != MT_SIG_MREMAP && MT_CK(cookie, ALIAS)))
			call_target(ctx, st);
	}
	st->outer_sp = sp;
	st->op = op;
	st->sig = sig;
	st->flags = flags;
	st->arg_size = size;
	st->arg_ptr = ptr;
	if (sig != MT_SIG_MREMAP)
		st->inner_size = 0;
	st->entry_ts = 0;
	if (sig == MT_SIG_MREMAP || sig == MT_SIG_XALLOCX ||
	    (ptr && (sig == MT_SIG_REALLOC || sig == MT_SIG_REALLOCARRAY)))
		st->entry_ts = bpf_ktime_get_ns();
	st->depth = 1;
	return 0;
}

/* operator new gets no return probe: a uretprobe replaces the return
 * address on the stack, and a bad_alloc thrown from inside new could then
 * not be unwound (the C++ runtime would terminate the program). Instead
 * the entry marks a new in progress and the allocation function it calls
 * (malloc, aligned_alloc) logs the event as the new. A nested new (new[]
 * tail-calling new, nothrow new calling new) keeps the outer one's op. */
static __always_inline int do_new(struct pt_regs *ctx)
{
	__u64 cookie = mt_cookie(ctx);
	struct tstate *st = state(1);
	if (!st)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	if (st->depth > 0 && sp <= st->outer_sp)
		return 0;
	__u64 ra = caller_ra(ctx);
	if (ovr_live(ctx, st, sp)) {
		if (sp < st->ovr_sp)
			return 0; /* called by the new in progress */
		/* At the same stack pointer with the same return address: a
		 * tail call (new[] jumping to new) keeps the outer op; so does
		 * a new from the same call site after one that threw, which is
		 * the same function. The size is this call's. */
		st->ovr_size = PT_REGS_PARM1(ctx);
		return 0;
	}
	st->skip_free_ptr = 0;
	st->ovr_op = MT_CK(cookie, OP);
	st->ovr_size = PT_REGS_PARM1(ctx);
	st->ovr_sp = sp;
	st->ovr_ret = ra;
	st->ovr_callsite_ino = 0;
	st->ovr_sampled = sample_rate ? mt_sample_take(st, st->ovr_size) : 1;
	st->ovr_stack = 0;
	if (!st->ovr_sampled)
		return 0;
	if (MT_CK(cookie, ALIAS))
		find_call_target(ctx, &st->ovr_callsite, &st->ovr_callsite_ino);
	st->ovr_stack = capture_stack(ctx, st);
	return 0;
}

/* The return of an operator new that allocates without a probed malloc
 * (jemalloc's, tcmalloc's, mimalloc's own): a uprobe on each of its ret
 * instructions, and on those of the functions it tail-calls (found by the
 * tracer's walk of its code), not a uretprobe, so its return address is
 * never replaced and a bad_alloc it throws unwinds as without memtrace.
 * A ret ends this new when the stack pointer is its entry's and its
 * return address is there; an inner probed allocation (jemalloc's aligned
 * new calls aligned_alloc) has logged the block already and cleared the
 * mark. */
static __always_inline int do_new_ret(struct pt_regs *ctx)
{
	struct tstate *st = state(0);
	if (!st || !st->ovr_op)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	if (sp != st->ovr_sp || caller_ra(ctx) != st->ovr_ret)
		return 0;
	__u8 op = st->ovr_op;
	st->ovr_op = 0;
	__u64 ptr = PT_REGS_RC(ctx);
	if (!ptr)
		return 0; /* a nothrow new that failed */
	if (sample_rate && (!st->ovr_sampled || !mt_sample_keep(ptr)))
		return 0;
	__u64 old_ptr = 0, old_size = 0;
	__u8 flags = 0;
	if (st->ovr_callsite_ino) {
		old_ptr = st->ovr_callsite;
		old_size = st->ovr_callsite_ino;
		flags = MT_FLAG_CALLSITE;
	}
	send(st, MT_EV_ALLOC, op, flags, ptr, st->ovr_size, st->ovr_stack, old_ptr, old_size, 0);
	return 0;
}

static __always_inline int do_return(struct pt_regs *ctx)
{
	struct tstate *st = state(0);
	if (!st || st->depth == 0)
		return 0;
	if (--st->depth != 0)
		return 0;
	/* Not a sample, and no old block that may be one: nothing to send. */
	if (sample_rate && !st->sampled && (st->arg_ptr == 0 || st->sig == MT_SIG_POSIX_MEMALIGN))
		return 0;
	__u64 ret = PT_REGS_RC(ctx);
	__u64 ptr = ret;
	__u64 size = st->arg_size;
	__u8 kind = MT_EV_ALLOC;
	switch (st->sig) {
	case MT_SIG_POSIX_MEMALIGN:
		if ((int)ret != 0)
			return 0;
		ptr = 0;
		bpf_probe_read_user(&ptr, sizeof(ptr), (void *)st->arg_ptr);
		break;
	case MT_SIG_XALLOCX:
		/* It returns the block's real size: at least size when the
		 * block was resized in place, as a realloc to the same
		 * address; less when it could not be. */
		if (ret < size)
			return 0;
		ptr = st->arg_ptr;
		kind = MT_EV_REALLOC;
		break;
	case MT_SIG_MMAP:
	case MT_SIG_MREMAP:
		if ((long)ret == -1)
			return 0;
		if (st->sig == MT_SIG_MREMAP)
			kind = MT_EV_REALLOC;
		break;
	case MT_SIG_REALLOC:
	case MT_SIG_REALLOCARRAY:
		if (st->arg_ptr == 0)
			break;
		if (ret == 0) {
			/* realloc(p, 0) frees p; any other NULL is a failure
			 * that leaves p alone. */
			if (size != 0)
				return 0;
			kind = MT_EV_FREE;
			ptr = st->arg_ptr;
		} else {
			kind = MT_EV_REALLOC;
		}
		break;
	case MT_SIG_STRDUP:
		size = st->inner_size;
		if (size == 0 && ptr)
			size = strlen_user(ptr);
		break;
	}
	if (ptr == 0)
		return 0;
	__u64 old_ptr = 0, old_size = 0;
	__u8 flags = st->flags;
	if (kind == MT_EV_REALLOC) {
		/* The old block is released inside the call, and another
		 * thread may be given it before this one returns (musl,
		 * jemalloc: one heap for all threads). So its free goes on its
		 * own, timed at the call, and the new block at the return: in
		 * time order each comes where it happened. */
		__u8 free_op = st->sig == MT_SIG_MREMAP ? MT_OP_MUNMAP : MT_OP_FREE;
		__u64 old_len = st->sig == MT_SIG_MREMAP ? st->inner_size : 0;
		if (!sample_rate || mt_sample_forget(st->arg_ptr))
			send(st, MT_EV_FREE, free_op, 0, st->arg_ptr, old_len, st->stack, 0, 0, st->entry_ts);
		kind = MT_EV_ALLOC;
	}
	if (sample_rate) {
		if (kind == MT_EV_FREE ? !mt_sample_forget(ptr) : !st->sampled || !mt_sample_keep(ptr))
			return 0;
	}
	if (kind != MT_EV_FREE && st->callsite_ino) {
		old_ptr = st->callsite;
		old_size = st->callsite_ino;
		flags |= MT_FLAG_CALLSITE;
	}
	send(st, kind, st->op, flags, ptr, size, st->stack, old_ptr, old_size, kind == MT_EV_FREE ? st->entry_ts : 0);
	return 0;
}

/* libc calls __libc_free directly (call rel32, not through its PLT) only
 * for its own bookkeeping, such as emptying a thread's tcache at thread
 * exit: an allocator-internal call, which an LD_PRELOAD interposer never
 * sees either. The program's frees arrive through a PLT stub or a GOT
 * pointer. x86 only: elsewhere the cookie never asks for this. */
static __always_inline int direct_internal_call(struct pt_regs *ctx, __u64 cookie)
{
	__u64 ret = 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)))
		return 0;
	/* Most frees come from outside the module: one read decides. */
	__u64 ip = PT_REGS_IP(ctx);
	__u64 before = MT_CK(cookie, FREE_BEFORE), after = MT_CK(cookie, FREE_AFTER);
	if (ret < ip - before || ret >= ip + after)
		return 0;
	__u8 insn[5];
	if (bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)))
		return 0;
	if (insn[0] != 0xe8)
		return 0;
	__s32 rel = insn[1] | insn[2] << 8 | insn[3] << 16 | (__u32)insn[4] << 24;
	__u64 fn = ip - MT_CK(cookie, FREE_DELTA);
	return ret + (__s64)rel == fn;
}

/* free, delete and munmap: no return probe needed. */
static __always_inline int do_free(struct pt_regs *ctx)
{
	__u64 ptr = PT_REGS_PARM1(ctx);
	if (ptr == 0)
		return 0;
	/* --sample: the free of a block not sampled sends nothing. */
	if (sample_rate && !mt_sample_maybe(ptr))
		return 0;
	__u64 cookie = mt_cookie(ctx);
	__u8 op = MT_CK(cookie, OP);
	__u64 sp = PT_REGS_SP(ctx);
	__u64 size = 0;
	/* Created for a thread that only frees too: its name goes once. */
	struct tstate *st = state(1);
	if (op == MT_OP_MUNMAP) {
		if (called_from_module(ctx, cookie) || from_allocator(ctx))
			return 0;
		size = PT_REGS_PARM2(ctx);
	}
	if (st) {
		/* Inside realloc(p, 0) or another traced allocator call. */
		if (st->depth > 0 && sp <= st->outer_sp)
			return 0;
	}
	if (MT_CK(cookie, SIG) == MT_SIG_FREE_CHECKED && direct_internal_call(ctx, cookie))
		return 0;
	if (st) {
		if (st->skip_free_ptr == ptr) {
			if (sp <= st->skip_free_sp) {
				/* operator delete's own free, or the plain
				 * delete a sized delete calls. */
				if (op == MT_OP_FREE)
					st->skip_free_ptr = 0;
				return 0;
			}
			st->skip_free_ptr = 0;
		}
		if (op != MT_OP_FREE && op != MT_OP_MUNMAP) {
			st->skip_free_ptr = ptr;
			st->skip_free_sp = sp;
		}
	}
	/* --sample: only a live sampled block's free is sent. */
	if (sample_rate && !mt_sample_forget(ptr))
		return 0;
	__u64 cs = 0, cs_ino = 0;
	__u8 flags = 0;
	if (op != MT_OP_MUNMAP && MT_CK(cookie, SIG) != MT_SIG_FREE_CHECKED && MT_CK(cookie, ALIAS)) {
		find_call_target(ctx, &cs, &cs_ino);
		if (cs_ino)
			flags = MT_FLAG_CALLSITE;
	}
	/* Captured first: a new stack's record must precede its event. */
	__u64 stack = st && free_stacks ? capture_stack(ctx, st) : 0;
	send(st, MT_EV_FREE, op, flags, ptr, size, stack, cs, cs_ino, 0);
	return 0;
}

/* Each program exists twice: uprobe_multi links need programs loaded
 * with their own attach type; classic links are the fallback. */
SEC("uprobe") int mt_enter(struct pt_regs *ctx)
{
	do_enter(ctx, 0);
	return 0;
}
SEC("uprobe.multi") int mt_enter_multi(struct pt_regs *ctx)
{
	do_enter(ctx, 0);
	return 0;
}
/* A classic uretprobe link's cookie is the pid it was made for
 * (tracer/attach.go). The kernel filters a PID-filtered uprobe's entries
 * by process, but kernels without a fix of late 2024 (the thread
 * "tracing/uprobe: Add missing PID filter for uretprobe") not its returns:
 * at a return every uretprobe link of the function runs, whichever process
 * it was made for. With a forked child traced beside its parent (Debian's
 * 6.1), each return ran twice, and an inner call's return (the mmap of a
 * new thread's first malloc) ended the outer call with the inner call's
 * result. uprobe_multi and session links filter their returns. */
SEC("uretprobe") int mt_return(struct pt_regs *ctx)
{
	__u64 pid = mt_cookie(ctx);
	if (pid && pid != mt_pid_tgid() >> 32)
		return 0;
	return do_return(ctx);
}
SEC("uretprobe.multi") int mt_return_multi(struct pt_regs *ctx)
{
	return do_return(ctx);
}

/* A session uprobe (kernels with BPF_TRACE_UPROBE_SESSION): one consumer
 * serves the entry and the return of each call, instead of two links. */
SEC("uprobe.session") int mt_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return())
		return do_return(ctx);
	return do_enter(ctx, 1);
}
SEC("uprobe") int mt_free(struct pt_regs *ctx)
{
	return do_free(ctx);
}
SEC("uprobe") int mt_new(struct pt_regs *ctx)
{
	return do_new(ctx);
}
SEC("uprobe.multi") int mt_new_multi(struct pt_regs *ctx)
{
	return do_new(ctx);
}
SEC("uprobe.multi") int mt_free_multi(struct pt_regs *ctx)
{
	return do_free(ctx);
}
SEC("uprobe") int mt_new_ret(struct pt_regs *ctx)
{
	return do_new_ret(ctx);
}
SEC("uprobe.multi") int mt_new_ret_multi(struct pt_regs *ctx)
{
	return do_new_ret(ctx);
}

#include "mt_proc.h"

/* Empty programs on the same probe points: the floor that benchmarks
 * compare against. */
SEC("uprobe") int mt_empty(struct pt_regs *ctx)
{
	return 0;
}
SEC("uprobe.multi") int mt_empty_multi(struct pt_regs *ctx)
{
	return 0;
}
SEC("uprobe.session") int mt_empty_session(struct pt_regs *ctx)
{
	return 0;
}

/* The floor for stack capture: the same stack_depth frames taken the same
 * way (return address at [sp] plus the kernel's frame-pointer walk), and
 * nothing else. */
static __always_inline int floor_stack(struct pt_regs *ctx)
{
	__u32 zero = 0;
	struct stackbuf *buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!buf || stack_depth == 0)
		return 0;
	bpf_probe_read_user(&buf->ips[0], 8, (void *)PT_REGS_SP(ctx));
	if (stack_depth > 1)
		bpf_get_stack(ctx, &buf->ips[1], (stack_depth - 1) * 8 & 0x3ff, BPF_F_USER_STACK | 1);
	return 0;
}
SEC("uprobe") int mt_floor_stack(struct pt_regs *ctx)
{
	return floor_stack(ctx);
}
SEC("uprobe.multi") int mt_floor_stack_multi(struct pt_regs *ctx)
{
	return floor_stack(ctx);
}
SEC("uprobe.session") int mt_floor_stack_session(struct pt_regs *ctx)
{
	if (!bpf_session_is_return())
		floor_stack(ctx);
	return 0;
}

/* Unused by the programs: keeps the ABI types in BTF so that the Go tests
 * can compare them with logfmt and the tracer. */
const volatile struct {
	enum mt_rec rec;
	enum mt_op op;
	enum mt_kind kind;
	enum mt_sig sig;
	struct mt_event ev;
	struct mt_event_packed packed;
	struct mt_thread thread;
	struct mt_stack stack;
	struct mt_file file;
	enum mt_stop stop;
	struct mt_urow urow;
	struct mt_uext uext;
	struct mt_umaps umaps;
	struct mt_ufile_key ufile_key;
	struct mt_ufile ufile;
	struct mt_remap remap;
	struct mt_backlog backlog;
} mt_abi_types = {};
