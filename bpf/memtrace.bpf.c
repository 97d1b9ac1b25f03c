// SPDX-License-Identifier: GPL-2.0
/* memtrace's kernel side: uprobes on the allocation functions, per-thread
 * nesting so that allocator-internal calls are logged once, a process filter
 * and one ring buffer with batched wake-ups.
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

/* Set by the agent before load. */
const volatile __u64 wakeup_bytes = 64 * 1024;

/* Records the ring buffer could not take; the agent reads and reports it. */
__u64 lost_records = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* Processes being traced (tgid -> 1). Links are PID-filtered too; this map
 * also covers probes shared by several targets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

struct tstate {
	__u64 outer_sp;      /* stack pointer at the outermost traced call */
	__u64 arg_size;
	__u64 arg_ptr;       /* realloc's old pointer, posix_memalign's out */
	__u64 inner_size;    /* strdup: the size its inner malloc asked for */
	__u64 skip_free_ptr; /* a delete in progress: its own free is not logged */
	__u64 skip_free_sp;
	__u64 ovr_sp;        /* an operator new in progress (see do_new) */
	__u64 ovr_size;
	__u64 callsite;      /* aligned_alloc/memalign: the PLT stub called, */
	__u64 callsite_ino;  /* as a file offset in this inode */
	__u32 depth;
	__u8 op;
	__u8 sig;
	__u8 ovr_op;
	__u8 flags;
};

/* Task-local storage: cheaper than a hash keyed by tid, and freed by the
 * kernel when the thread exits. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} tstates SEC(".maps");

static __always_inline int is_target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&targets, &tgid) != 0;
}

static __always_inline struct tstate *state(int create)
{
	return bpf_task_storage_get(&tstates, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void submit(struct mt_event *e)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, avail >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline struct mt_event *reserve(void)
{
	struct mt_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_records, 1);
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->ts_ns = bpf_ktime_get_ns();
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->stack_id = -1;
	e->flags = 0;
	e->old_ptr = 0;
	e->old_size = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

/* mmap, munmap and mremap called from inside libc (malloc's own mmap, a
 * thread stack) are not the program's calls. The return address sits at
 * [sp] at the probe point (before any push), and the cookie carries how far
 * the module's text extends before and after the probe, so the test needs
 * no per-process state and has no window before the agent knows where libc
 * was mapped. */
static __always_inline int called_from_module(struct pt_regs *ctx, __u64 cookie)
{
	__u64 before = (cookie >> 16) & 0xffffff;
	__u64 after = cookie >> 40;
	if (before == 0 && after == 0)
		return 0;
	__u64 ret = 0;
	bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx));
	__u64 ip = PT_REGS_IP(ctx);
	return ret >= ip - before && ret < ip + after;
}

/* aligned_alloc and memalign are one function in glibc, so one probe
 * serves both; which name the program called shows in the call that got
 * there: a call rel32 to a PLT stub of the caller's module. The stub is
 * sent as (inode, file offset), found through the VMA now, so that the
 * agent can name it later even if the process has exited by then. */
#if defined(__TARGET_ARCH_x86)
struct vma_ctx {
	__u64 addr;
	__u64 fileoff;
	__u64 ino;
};

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

static __always_inline void call_target(struct pt_regs *ctx, struct tstate *st)
{
	st->callsite = 0;
	st->callsite_ino = 0;
#if defined(__TARGET_ARCH_x86)
	__u64 ret = 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)))
		return;
	__u8 insn[5];
	if (bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)) || insn[0] != 0xe8)
		return;
	__s32 rel = insn[1] | insn[2] << 8 | insn[3] << 16 | (__u32)insn[4] << 24;
	struct vma_ctx c = {.addr = ret + (__s64)rel};
	/* find_vma only try-locks the mm; when another thread holds it, the
	 * absolute address goes instead (callsite_ino = -1) and the agent
	 * names it from its record of the process's mappings. */
	if (bpf_find_vma(bpf_get_current_task_btf(), c.addr, vma_cb, &c, 0) || !c.ino) {
		st->callsite = c.addr;
		st->callsite_ino = (__u64)-1;
		return;
	}
	st->callsite = c.fileoff;
	st->callsite_ino = c.ino;
#endif
}

/* The uprobe programs do not consult the targets map: every link is
 * PID-filtered, so the kernel runs them for the traced processes only (a
 * forked child's inherited breakpoints are removed on its first hit). */
static __always_inline int do_enter(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u8 op = cookie & 0xff;
	__u8 sig = (cookie >> 8) & 0xff;
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
		if (st->depth == 1 && sig == MT_SIG_SIZE0 && op == MT_OP_MALLOC &&
		    st->sig == MT_SIG_STRDUP)
			st->inner_size = PT_REGS_PARM1(ctx);
		st->depth++;
		return 0;
	}
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
	case MT_SIG_MMAP:
		if (called_from_module(ctx, cookie))
			return 0;
		/* File mappings are not logged, but the agent must know them
		 * to leave their munmap out too. */
		if (!(PT_REGS_PARM4(ctx) & MT_MAP_ANONYMOUS))
			flags = MT_FLAG_FILE;
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_SIG_MREMAP: {
		if (called_from_module(ctx, cookie))
			return 0;
		ptr = PT_REGS_PARM1(ctx);
		st->inner_size = PT_REGS_PARM2(ctx);
		size = PT_REGS_PARM3(ctx);
		break;
	}
	}
	/* The allocation an operator new makes for the program: logged as
	 * the new, with the size the program asked for. */
	if (st->ovr_op) {
		if (sp < st->ovr_sp) {
			op = st->ovr_op;
			size = st->ovr_size;
		}
		st->ovr_op = 0;
	}
	st->callsite_ino = 0;
	if (op == MT_OP_ALIGNED_ALLOC)
		call_target(ctx, st);
	st->outer_sp = sp;
	st->op = op;
	st->sig = sig;
	st->flags = flags;
	st->arg_size = size;
	st->arg_ptr = ptr;
	if (sig != MT_SIG_MREMAP)
		st->inner_size = 0;
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct tstate *st = state(1);
	if (!st)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	if (st->depth > 0 && sp <= st->outer_sp)
		return 0;
	if (st->ovr_op && sp <= st->ovr_sp)
		return 0;
	st->ovr_op = cookie & 0xff;
	st->ovr_size = PT_REGS_PARM1(ctx);
	st->ovr_sp = sp;
	return 0;
}

static __always_inline int do_return(struct pt_regs *ctx)
{
	struct tstate *st = state(0);
	if (!st || st->depth == 0)
		return 0;
	if (--st->depth != 0)
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
		break;
	}
	if (ptr == 0)
		return 0;
	struct mt_event *e = reserve();
	if (!e)
		return 0;
	e->kind = kind;
	e->op = st->op;
	e->ptr = ptr;
	e->size = size;
	e->flags = st->flags;
	if (kind == MT_EV_REALLOC) {
		e->old_ptr = st->arg_ptr;
		e->old_size = st->inner_size;
	} else if (st->callsite_ino) {
		e->old_ptr = st->callsite;
		e->old_size = st->callsite_ino;
		e->flags |= MT_FLAG_CALLSITE;
	}
	submit(e);
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
	__u64 before = (cookie >> 24) & 0xfffff, after = cookie >> 44;
	if (ret < ip - before || ret >= ip + after)
		return 0;
	__u8 insn[5];
	if (bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)))
		return 0;
	if (insn[0] != 0xe8)
		return 0;
	__s32 rel = insn[1] | insn[2] << 8 | insn[3] << 16 | (__u32)insn[4] << 24;
	__u64 fn = ip - ((cookie >> 16) & 0xff);
	return ret + (__s64)rel == fn;
}

/* free, delete and munmap: no return probe needed. */
static __always_inline int do_free(struct pt_regs *ctx)
{
	__u64 ptr = PT_REGS_PARM1(ctx);
	if (ptr == 0)
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u8 op = cookie & 0xff;
	__u64 sp = PT_REGS_SP(ctx);
	__u64 size = 0;
	struct tstate *st = state(op != MT_OP_FREE && op != MT_OP_MUNMAP);
	if (op == MT_OP_MUNMAP) {
		if (called_from_module(ctx, cookie))
			return 0;
		size = PT_REGS_PARM2(ctx);
	}
	if (st) {
		/* Inside realloc(p, 0) or another traced allocator call. */
		if (st->depth > 0 && sp <= st->outer_sp)
			return 0;
	}
	if (((cookie >> 8) & 0xff) == MT_SIG_FREE_CHECKED && direct_internal_call(ctx, cookie))
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
	struct mt_event *e = reserve();
	if (!e)
		return 0;
	e->kind = MT_EV_FREE;
	e->op = op;
	e->ptr = ptr;
	e->size = size;
	submit(e);
	return 0;
}

/* Each program exists twice: uprobe_multi links need programs loaded
 * with their own attach type; classic links are the fallback. */
SEC("uprobe") int mt_enter(struct pt_regs *ctx) { return do_enter(ctx); }
SEC("uprobe.multi") int mt_enter_multi(struct pt_regs *ctx) { return do_enter(ctx); }
SEC("uretprobe") int mt_return(struct pt_regs *ctx) { return do_return(ctx); }
SEC("uretprobe.multi") int mt_return_multi(struct pt_regs *ctx) { return do_return(ctx); }
SEC("uprobe") int mt_free(struct pt_regs *ctx) { return do_free(ctx); }
SEC("uprobe") int mt_new(struct pt_regs *ctx) { return do_new(ctx); }
SEC("uprobe.multi") int mt_new_multi(struct pt_regs *ctx) { return do_new(ctx); }
SEC("uprobe.multi") int mt_free_multi(struct pt_regs *ctx) { return do_free(ctx); }

SEC("tp_btf/sched_process_exit")
int BPF_PROG(mt_exit)
{
	if (!is_target())
		return 0;
	struct mt_event *e = reserve();
	if (!e)
		return 0;
	e->kind = MT_EV_EXIT;
	e->op = 0;
	e->ptr = 0;
	e->size = 0;
	submit(e);
	return 0;
}

/* Empty programs on the same probe points: the floor that benchmarks
 * compare against. */
SEC("uprobe") int mt_empty(struct pt_regs *ctx) { return 0; }
SEC("uprobe.multi") int mt_empty_multi(struct pt_regs *ctx) { return 0; }

/* Unused by the programs: keeps the ABI types in BTF so that the Go tests
 * can compare them with logfmt and the tracer. */
const volatile struct {
	enum mt_op op;
	enum mt_kind kind;
	enum mt_sig sig;
	struct mt_event ev;
} mt_abi_types = {};
