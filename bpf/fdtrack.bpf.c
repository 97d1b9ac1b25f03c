// SPDX-License-Identifier: GPL-2.0
/* memtrace's descriptor tracking: the syscalls that create and close file
 * descriptors, and the dma-heap / ION ioctls that allocate buffers, seen
 * through the raw sys_enter / sys_exit tracepoints (no tracefs needed).
 * Arguments are kept per thread from entry to exit; only successful calls
 * produce a record. See docs/fd.md.
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
#include "fdtrack.h"
#include "memtrace.h"

char LICENSE[] SEC("license") = "GPL";

/* The allocation tracer's stack walk, whole: a descriptor's stack is
 * walked over the same unwind tables and sent as the same mt_stack
 * record, through the same ring, as an allocation's. The Go side loads
 * this object with memtrace's maps in place of the ones these parts
 * declare (the tables, events, stacks_sent, files_sent); the per-CPU
 * scratch stays this object's own. wakeup_bytes, lost_records and
 * stack_depth are declared by mt_state.h and mean here what they mean
 * there, for this object's ring and records. docs/fd.md, "Stacks". */
#include "mt_state.h"
#include "mt_ring.h"
#include "mt_frames.h"
#include "mt_dwarf.h"
#include "mt_fp.h"
#include "mt_capture.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} fd_events SEC(".maps");

/* Processes being traced (tgid -> 1), filled by AddProcess. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} fd_targets SEC(".maps");

#define FD_MAX_SYSCALL 512

/* Syscall number -> enum fd_call, 0 for the syscalls not traced. Filled by
 * the Go side from golang.org/x/sys/unix's per-architecture numbers, and
 * only with the calls that the tracked kinds need. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FD_MAX_SYSCALL);
	__type(key, __u32);
	__type(value, __u8);
} fd_calls SEC(".maps");

struct fstate {
	__u64 a0, a1, a2, a3;
	__u64 enter_ts;
	__u8 call;
};

/* Per-thread state keyed by tid, in an LRU hash rather than task-local
 * storage: task storage lookups fail while another program on the same
 * CPU is preempted inside one, and the call would go unlogged (seen under
 * load in memtrace.bpf.c). LRU: a thread killed inside a blocking accept
 * leaves an entry that ages out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct fstate);
} fd_states SEC(".maps");

static __always_inline struct fstate *fstate_get(int create)
{
	__u32 tid = mt_pid_tgid();
	struct fstate *st = bpf_map_lookup_elem(&fd_states, &tid);
	if (st || !create)
		return st;
	static const struct fstate zero = {};
	bpf_map_update_elem(&fd_states, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&fd_states, &tid);
}

/* CO-RE flavours of the kernel types walked to name a device fd: matched
 * by name against the running kernel's BTF, on every architecture. */
struct qstr___fd {
	const unsigned char *name;
} __attribute__((preserve_access_index));
struct dentry___fd {
	struct qstr___fd d_name;
} __attribute__((preserve_access_index));
struct path___fd {
	struct dentry___fd *dentry;
} __attribute__((preserve_access_index));
struct file___fd {
	struct path___fd f_path;
} __attribute__((preserve_access_index));
struct fdtable___fd {
	unsigned int max_fds;
	struct file___fd **fd;
} __attribute__((preserve_access_index));
struct files_struct___fd {
	struct fdtable___fd *fdt;
} __attribute__((preserve_access_index));
struct task_struct___fd {
	struct files_struct___fd *files;
} __attribute__((preserve_access_index));

#define FD_F_DUPFD 0
#define FD_F_DUPFD_CLOEXEC 1030
#define FD_CLOSE_RANGE_CLOEXEC 4
#define FD_EBADF 9

static __always_inline int fd_is_target(void)
{
	__u32 tgid = mt_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&fd_targets, &tgid) != 0;
}

static __always_inline __u8 lookup_call(long nr)
{
	if (nr < 0 || nr >= FD_MAX_SYSCALL)
		return 0;
	__u32 key = nr;
	__u8 *c = bpf_map_lookup_elem(&fd_calls, &key);
	return c ? *c : 0;
}

static __always_inline int on_enter(__u8 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	switch (call) {
	case FD_CALL_IOCTL: {
		__u32 cmd = a1;
		if (cmd != FD_DMA_HEAP_IOCTL_ALLOC && cmd != FD_ION_IOC_ALLOC && cmd != FD_ION_IOC_ALLOC_LEGACY &&
		    cmd != FD_ION_IOC_FREE)
			return 0;
		break;
	}
	case FD_CALL_FCNTL:
		if ((int)a1 != FD_F_DUPFD && (int)a1 != FD_F_DUPFD_CLOEXEC)
			return 0;
		break;
	case FD_CALL_SIGNALFD:
	case FD_CALL_SIGNALFD4:
		/* With an existing fd, signalfd changes its mask. */
		if ((int)a0 != -1)
			return 0;
		break;
	case FD_CALL_DUP2:
		/* dup2(fd, fd) only checks fd. */
		if ((int)a0 == (int)a1)
			return 0;
		break;
	case FD_CALL_CLOSE_RANGE:
		/* CLOSE_RANGE_CLOEXEC marks, it does not close. */
		if (a2 & FD_CLOSE_RANGE_CLOEXEC)
			return 0;
		break;
	}
	struct fstate *st = fstate_get(1);
	if (!st)
		return 0;
	st->call = call;
	st->a0 = a0;
	st->a1 = a1;
	st->a2 = a2;
	st->a3 = a3;
	/* A close's number may be reused by another thread before this one
	 * reaches sys_exit: stamping it at entry keeps the records of the
	 * two in the order that they happened. */
	st->enter_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline struct fd_event *reserve(void)
{
	struct fd_event *e = bpf_ringbuf_reserve(&fd_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_records, 1);
		return 0;
	}
	__u64 id = mt_pid_tgid();
	e->ts_ns = bpf_ktime_get_ns();
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->size = 0;
	e->flags = 0;
	e->extra = 0;
	e->fd = -1;
	e->fd2 = -1;
	e->aux = 0;
	e->trunc = 0;
	e->path[0] = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

static __always_inline void fd_submit(struct fd_event *e)
{
	__u64 avail = bpf_ringbuf_query(&fd_events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, avail >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* The kernel has just copied the string in, so its page is resident now,
 * which it need not have been at entry. */
static __always_inline void read_path(struct fd_event *e, __u64 uptr)
{
	long n = bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)uptr);
	if (n < 0) {
		e->path[0] = 0;
		return;
	}
	if (n == sizeof(e->path)) {
		char c = 0;
		bpf_probe_read_user(&c, 1, (const void *)(uptr + sizeof(e->path) - 1));
		e->trunc = c != 0;
	}
}

/* The name of the file behind one of the current process's fds (for a
 * dma-heap device, the heap's name). */
static __always_inline void fd_name(struct fd_event *e, int fd)
{
	struct task_struct___fd *task = (void *)bpf_get_current_task();
	struct fdtable___fd *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return;
	struct file___fd **arr = BPF_CORE_READ(fdt, fd);
	struct file___fd *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]) || !f)
		return;
	const unsigned char *name = BPF_CORE_READ(f, f_path.dentry, d_name.name);
	if (bpf_probe_read_kernel_str(e->path, 32, name) < 0)
		e->path[0] = 0;
}

static __always_inline int read_pair(struct fd_event *e, __u64 uptr)
{
	int fds[2];
	if (bpf_probe_read_user(fds, sizeof(fds), (const void *)uptr))
		return -1;
	e->fd = fds[0];
	e->fd2 = fds[1];
	return 0;
}

static __always_inline int on_ioctl(struct fd_event *e, struct fstate *st)
{
	__u32 cmd = st->a1;
	const void *arg = (const void *)st->a2;
	e->fd2 = st->a0;
	e->flags = 0;
	switch (cmd) {
	case FD_DMA_HEAP_IOCTL_ALLOC: {
		/* struct dma_heap_allocation_data {u64 len; u32 fd; u32 fd_flags; u64 heap_flags;} */
		struct {
			__u64 len;
			__u32 fd;
			__u32 fd_flags;
			__u64 heap_flags;
		} d;
		if (bpf_probe_read_user(&d, sizeof(d), arg))
			return -1;
		e->type = FD_EV_DMABUF_ALLOC;
		e->size = d.len;
		e->fd = d.fd;
		e->flags = d.fd_flags;
		e->extra = d.heap_flags;
		break;
	}
	case FD_ION_IOC_ALLOC: {
		/* struct ion_allocation_data {u64 len; u32 heap_id_mask; u32 flags; u32 fd; u32 unused;} */
		struct {
			__u64 len;
			__u32 heap_id_mask;
			__u32 flags;
			__u32 fd;
			__u32 unused;
		} d;
		if (bpf_probe_read_user(&d, sizeof(d), arg))
			return -1;
		e->type = FD_EV_ION_ALLOC;
		e->size = d.len;
		e->aux = d.heap_id_mask;
		e->flags = d.flags;
		e->fd = d.fd;
		break;
	}
	case FD_ION_IOC_ALLOC_LEGACY: {
		/* struct ion_allocation_data {size_t len; size_t align;
		 * unsigned int heap_id_mask; unsigned int flags; ion_user_handle_t handle;} */
		struct {
			__u64 len;
			__u64 align;
			__u32 heap_id_mask;
			__u32 flags;
			__s32 handle;
			__u32 pad;
		} d;
		if (bpf_probe_read_user(&d, sizeof(d), arg))
			return -1;
		e->type = FD_EV_ION_LEGACY_ALLOC;
		e->size = d.len;
		e->extra = d.align;
		e->aux = d.heap_id_mask;
		e->flags = d.flags;
		e->fd = d.handle;
		break;
	}
	case FD_ION_IOC_FREE: {
		__s32 handle;
		if (bpf_probe_read_user(&handle, sizeof(handle), arg))
			return -1;
		e->type = FD_EV_ION_FREE;
		e->fd = handle;
		break;
	}
	default:
		return -1;
	}
	fd_name(e, st->a0);
	return 0;
}

/* The user stack at a system call's exit, as the allocation tracer
 * sends its stacks (mt_capture_stack): walked, hashed into an id with the
 * tgid, sent once. Frame 0 is the instruction after the syscall, in
 * libc's wrapper; it is no return address (is_return 0), so its own row
 * gives the first step. A global function: the verifier checks the walk
 * once, not at every path of on_exit. */
__noinline __u64 fd_dwarf_capture(__u64 pc, __u64 sp, __u64 fp, __u64 lr)
{
	__u32 zero = 0;
	struct stackbuf *buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!buf)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mt_walk_ref ref = {};
	struct mt_walk *w = walk_begin(&ref, buf, pc, sp, fp);
	if (!w)
		return 0;
	w->s.lr = lr;
#if defined(__TARGET_ARCH_arm64)
	/* In a leaf wrapper the return address is still in x30. */
	w->s.lr_valid = 1;
#endif
	buf->ips[0] = pc;
	w->n = 1;
	if (stack_depth > 1)
		mt_walk_frames(&ref);
	__u16 reason = w->n >= stack_depth ? MT_STOP_DEPTH : w->reason;
	__u32 n = w->n;
	if (n > MT_MAX_FRAMES)
		n = MT_MAX_FRAMES;
	buf->n = n;
	__u64 id = mt_stack_id(buf, n, 0xcbf29ce484222325ULL ^ tgid) | 1; /* never 0 */
	mt_send_once(id, buf, n, reason);
	return id;
}

/* --stack-unwind fp: the kernel's frame-pointer walk. Frame 0 is in
 * libc's wrapper, which keeps no frame pointer, so the kernel's walk
 * misses the wrapper's caller. The first of the words just above the user
 * stack pointer that is a return address (the five bytes before it are a
 * call rel32 into the PLT or the wrapper) is put in as frame 1. */
#if defined(__TARGET_ARCH_x86)
struct fd_scan {
	__u64 sp;
	__u64 ret;
};

static long scan_cb(__u64 i, void *data)
{
	struct fd_scan *c = data;
	__u64 w = 0;
	__u8 insn[5];
	if (bpf_probe_read_user(&w, sizeof(w), (void *)(c->sp + i * 8)))
		return 1;
	if (w < 4096 || bpf_probe_read_user(insn, sizeof(insn), (void *)(w - 5)) || insn[0] != 0xe8)
		return 0;
	c->ret = w;
	return 1;
}

struct fd_shift {
	struct stackbuf *buf;
	__u32 top;
};

/* Moves frame top - 1 - i one place up, making room at frame 1. */
static long shift_cb(__u64 i, void *data)
{
	struct fd_shift *c = data;
	__u32 k = c->top - i;
	if (k < 2 || k > MT_MAX_FRAMES)
		return 1;
	/* Masked: in the compat build's bounded loop the verifier lost k's
	 * bounds (an access 8 bytes before the buffer). */
	c->buf->ips[k & MT_MAX_FRAMES] = c->buf->ips[(k - 1) & MT_MAX_FRAMES];
	return 0;
}
#endif

/* Not inlined: its locals would count in the syscall-exit program's frame
 * on the DWARF walk's path too, whose chain of calls the verifier holds to
 * 512 stack bytes. */
static __noinline __u64 fd_fp_capture(__u64 *ctx, __u64 sp)
{
	__u32 zero = 0;
	struct stackbuf *buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!buf)
		return 0;
	__u32 want = stack_depth < MT_MAX_FRAMES ? stack_depth : MT_MAX_FRAMES;
	long got = bpf_get_stack(ctx, buf->ips, (want * 8) & 0x3ff, BPF_F_USER_STACK);
	if (got <= 0)
		return 0;
	__u32 n = got / 8;
#if defined(__TARGET_ARCH_x86)
	struct fd_scan c = {.sp = sp};
	mt_loop(24, 24, scan_cb, &c);
	if (c.ret && want >= 2 && !(n > 1 && buf->ips[1] == c.ret)) {
		struct fd_shift sh = {.buf = buf, .top = n < want ? n : want - 1};
		mt_loop(MT_MAX_FRAMES, MT_MAX_FRAMES, shift_cb, &sh);
		buf->ips[1] = c.ret;
		if (n < want)
			n++;
	}
#endif
	if (n > MT_MAX_FRAMES)
		n = MT_MAX_FRAMES;
	buf->n = n;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 id = mt_stack_id(buf, n, 0xcbf29ce484222325ULL ^ tgid) | 1;
	mt_send_once(id, buf, n, MT_STOP_FPWALK);
	return id;
}

/* The user registers as the system call left them. */
static __always_inline __u64 fd_stack(__u64 *ctx)
{
#ifdef MT_COMPAT
	/* No bpf_task_pt_regs (5.15): the tracepoint's first argument is
	 * the same registers. */
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
#else
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
#endif
	__u64 sp = PT_REGS_SP_CORE(regs);
	if (!unwind_dwarf)
		return fd_fp_capture(ctx, sp);
#if defined(__TARGET_ARCH_x86)
	return fd_dwarf_capture(PT_REGS_IP_CORE(regs), sp, PT_REGS_FP_CORE(regs), 0);
#else
	return fd_dwarf_capture(PT_REGS_IP_CORE(regs), sp, PT_REGS_FP_CORE(regs),
				BPF_CORE_READ(regs, regs[30]) & MT_ARM64_PAC_MASK);
#endif
}

static __always_inline int on_exit(void *ctx, long ret)
{
	struct fstate *st = fstate_get(0);
	if (!st || st->call == 0)
		return 0;
	__u8 call = st->call;
	st->call = 0;
	if (ret < 0) {
		/* close releases the number even when flushing the file
		 * fails (EINTR, EIO); only EBADF means nothing was closed. */
		if (call != FD_CALL_CLOSE || ret == -FD_EBADF)
			return 0;
	}
	struct fd_event *e = reserve();
	if (!e)
		return 0;
	e->stack = 0;
	if (stack_depth)
		e->stack = fd_stack(ctx);
	e->call = call;
	e->type = FD_EV_OPEN;
	e->fd = ret;
	switch (call) {
	case FD_CALL_OPEN:
		e->flags = st->a1;
		read_path(e, st->a0);
		break;
	case FD_CALL_CREAT:
		read_path(e, st->a0);
		break;
	case FD_CALL_OPENAT:
		e->flags = st->a2;
		read_path(e, st->a1);
		break;
	case FD_CALL_OPENAT2: {
		__u64 flags = 0;
		bpf_probe_read_user(&flags, sizeof(flags), (const void *)st->a2);
		e->flags = flags;
		read_path(e, st->a1);
		break;
	}
	case FD_CALL_MEMFD_CREATE:
		e->flags = st->a1;
		read_path(e, st->a0);
		break;
	case FD_CALL_SOCKET:
		e->aux = st->a0;
		e->flags = st->a1;
		break;
	case FD_CALL_SOCKETPAIR:
		e->aux = st->a0;
		e->flags = st->a1;
		if (read_pair(e, st->a3))
			goto drop;
		break;
	case FD_CALL_PIPE:
		if (read_pair(e, st->a0))
			goto drop;
		break;
	case FD_CALL_PIPE2:
		e->flags = st->a1;
		if (read_pair(e, st->a0))
			goto drop;
		break;
	case FD_CALL_ACCEPT4:
		e->flags = st->a3;
		break;
	case FD_CALL_DUP:
		e->fd2 = st->a0;
		break;
	case FD_CALL_DUP2:
		e->fd2 = st->a0;
		break;
	case FD_CALL_DUP3:
		e->fd2 = st->a0;
		e->flags = st->a2;
		break;
	case FD_CALL_FCNTL:
		e->fd2 = st->a0;
		e->flags = st->a1; /* the command: F_DUPFD or F_DUPFD_CLOEXEC */
		break;
	case FD_CALL_EVENTFD2:
	case FD_CALL_TIMERFD_CREATE:
		e->flags = st->a1;
		break;
	case FD_CALL_SIGNALFD4:
		e->flags = st->a3;
		break;
	case FD_CALL_EPOLL_CREATE1:
	case FD_CALL_INOTIFY_INIT1:
		e->flags = st->a0;
		break;
	case FD_CALL_CLOSE:
		e->type = FD_EV_CLOSE;
		e->fd = st->a0;
		e->ts_ns = st->enter_ts;
		break;
	case FD_CALL_CLOSE_RANGE:
		e->type = FD_EV_CLOSE_RANGE;
		e->fd = st->a0;
		e->fd2 = st->a1;
		e->flags = st->a2;
		e->ts_ns = st->enter_ts;
		break;
	case FD_CALL_IOCTL:
		if (on_ioctl(e, st))
			goto drop;
		break;
	}
	fd_submit(e);
	return 0;
drop:
	bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* raw_tp/sys_enter: (struct pt_regs *regs, long id); sys_exit: (regs, ret).
 * The calls map is consulted first: an array lookup turns away most of the
 * system's syscalls more cheaply than the process filter's hash. */
SEC("raw_tp/sys_enter")
int fd_sys_enter(__u64 *ctx)
{
	__u8 call = lookup_call((long)ctx[1]);
	if (!call || !fd_is_target())
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	return on_enter(call, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			PT_REGS_PARM3_CORE_SYSCALL(regs), PT_REGS_PARM4_CORE_SYSCALL(regs));
}

SEC("raw_tp/sys_exit")
int fd_sys_exit(__u64 *ctx)
{
	return on_exit(ctx, (long)ctx[1]);
}

/* The same entry and exit logic with the syscall's arguments given
 * directly (ctx = {nr, a0, a1, a2, a3} and {ret}), for BPF_PROG_TEST_RUN:
 * a test run cannot hand the program a kernel pt_regs, but it runs in the
 * calling thread, so the user memory that the decoders read is the test's. */
SEC("raw_tp")
int fd_test_enter(__u64 *ctx)
{
	__u8 call = lookup_call((long)ctx[0]);
	if (!call || !fd_is_target())
		return 0;
	return on_enter(call, ctx[1], ctx[2], ctx[3], ctx[4]);
}

SEC("raw_tp")
int fd_test_exit(__u64 *ctx)
{
	return on_exit(ctx, (long)ctx[0]);
}

/* Unused by the programs: keeps the ABI types in BTF so that the Go tests
 * can compare them with fdtrace/abi.go. */
const volatile struct {
	enum fd_call call;
	enum fd_type type;
	struct fd_event ev;
} fd_abi_types = {};
