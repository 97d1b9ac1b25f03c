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

/* kfunc of session uprobes (Linux 6.13+); weak, so older kernels load. */
extern bool bpf_session_is_return(void) __ksym __weak;
/* kfuncs of the release at memtrace's exit (bpf_send_signal_task: Linux
 * 6.13+); where they are missing, memtrace's watchdog process releases. */
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, u64 value) __ksym __weak;


/* Set by the agent before load. */
const volatile __u64 wakeup_bytes = 64 * 1024;

/* Stack capture: frames per event (0: off) and, when n_stack_threads > 0,
 * the thread-name substrings that select threads (--stack-threads). */
const volatile __u32 stack_depth = 0;
/* 0: frees carry no stack (--no-free-stacks): half the walks of a
 * program that frees what it allocates. */
const volatile __u8 free_stacks = 1;
const volatile __u32 n_stack_threads = 0;
const volatile char stack_threads[8][16] = {};

/* --follow: trace the processes the targets fork. hold_exec: stop a
 * target that execs until the agent has read its new image's mappings
 * (always in -- mode, where memtrace is the parent; with --follow). */
const volatile __u8 follow = 0;
const volatile __u8 hold_exec = 0;
/* memtrace's own tgid: its exit releases every hold (agent_exit). */
const volatile __u32 agent_tgid = 0;
/* Set when memtrace lets every held process go (the agent's release at
 * the end of a run, or agent_exit): no process is held after it. */
__u32 released = 0;

/* Records the ring buffer could not take; the agent reads and reports it. */
__u64 lost_records = 0;
/* Set once a library with an allocator of its own (not libc's) is probed:
 * only then is an mmap's caller looked up (from_allocator). */
__u32 alloc_libs = 0;

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

struct stackbuf {
	__u64 ips[MT_MAX_FRAMES + 1];
	__u32 n; /* frames in ips, for the hash's callback */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stackbuf);
} stack_scratch SEC(".maps");

/* Files whose path was sent, by inode. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} files_sent SEC(".maps");

/* Stacks already sent to the agent, by id (which hashes the tgid in). LRU:
 * an evicted stack is simply sent again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} stacks_sent SEC(".maps");

/* Processes the kernel side stops for the agent: HOLD_PENDING, a forked
 * child to stop at its first instruction; HOLD_STOPPED, stopped and waiting
 * for the agent's SIGCONT, which deletes the entry. memtrace's watchdog
 * resumes every HOLD_STOPPED process when memtrace dies, so no stop can
 * outlive it. */
#define HOLD_PENDING 1
#define HOLD_STOPPED 2
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* MT_HOLD_KEY */
	__type(value, __u8);
} hold SEC(".maps");

/* Fork, exec and exit records that found the ring buffer full (see struct
 * mt_backlog). */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 4096);
	__type(value, struct mt_backlog);
} backlog SEC(".maps");

struct tstate {
	__u64 owner;         /* the tid using this slot (tslots); 0: free */
	__u64 outer_sp;      /* stack pointer at the outermost traced call */
	__u64 arg_size;
	__u64 arg_ptr;       /* realloc's old pointer, posix_memalign's out */
	__u64 inner_size;    /* strdup: the size its inner malloc asked for */
	__u64 skip_free_ptr; /* a delete in progress: its own free is not logged */
	__u64 skip_free_sp;
	__u64 ovr_sp;        /* an operator new in progress (see do_new) */
	__u64 ovr_ret;       /* ... its return address, at [ovr_sp] while it runs */
	__u64 ovr_size;
	__u64 ovr_callsite;  /* ... the PLT stub it was called through (MT_CK_ALIAS) */
	__u64 ovr_callsite_ino;
	__u64 callsite;      /* aligned_alloc/memalign: the PLT stub called, */
	__u64 callsite_ino;  /* as a file offset in this inode */
	__u64 stack;         /* the outermost call's stack */
	__u64 ovr_stack;
	__u64 entry_ts;      /* realloc, mremap: when the call began (see do_return) */
	__u64 comm_lo, comm_hi; /* the name stack_ok was decided for */
	__u8 stack_ok;       /* 1: capture, 2: do not */
	__u8 comm_ok;        /* the agent has the thread's current name */
	__u32 nev;           /* events sent: paces the wake-up test */
	__u32 depth;
	__u8 op;
	__u8 sig;
	__u8 ovr_op;
	__u8 flags;
};

/* Per-thread state: an array slot (tslots, below) and, for a thread whose
 * tid collides with a live one's slot, this hash keyed by tid. Not
 * task-local storage: task storage is guarded by a per-CPU busy counter
 * held with only migration disabled, so a program preempted there made
 * another thread's lookup on the same CPU fail, and its calls went
 * unlogged (seen under load). Lookups here take no lock; entries go when
 * the thread exits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tstate);
} tstates SEC(".maps");

/* The inodes of the allocator libraries probed (jemalloc, tcmalloc,
 * mimalloc: those that define malloc but not mmap), and per process the
 * text ranges found to be theirs, so that most tests need no VMA lookup
 * (find_vma only try-locks the mm, and fails while another thread maps). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, __u8);
} alloc_inos SEC(".maps");

#define MT_ALLOC_RANGES 2
struct alloc_text {
	__u64 lo[MT_ALLOC_RANGES], hi[MT_ALLOC_RANGES];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct alloc_text);
} alloc_texts SEC(".maps");

static __always_inline int is_target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&targets, &tgid) != 0;
}

/* The fast path: an array slot per tid modulo its size, claimed with a
 * compare-and-swap, so that the three lookups of a malloc+free pair cost
 * an index each instead of a hash. Two live threads whose tids collide
 * are rare; the second one uses the hash. */
#define MT_SLOTS 32768
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MT_SLOTS);
	__type(key, __u32);
	__type(value, struct tstate);
} tslots SEC(".maps");

static __always_inline struct tstate *state(int create)
{
	__u32 tid = bpf_get_current_pid_tgid();
	__u32 idx = tid & (MT_SLOTS - 1);
	struct tstate *st = bpf_map_lookup_elem(&tslots, &idx);
	if (st) {
		if (st->owner == tid)
			return st;
		if (create && st->owner == 0 && __sync_val_compare_and_swap(&st->owner, 0, (__u64)tid) == 0) {
			/* A slot another thread left: start clean. */
			st->depth = 0;
			st->comm_ok = 0;
			st->stack_ok = 0;
			st->ovr_op = 0;
			st->skip_free_ptr = 0;
			st->callsite_ino = 0;
			st->stack = 0;
			return st;
		}
	}
	st = bpf_map_lookup_elem(&tstates, &tid);
	if (st || !create)
		return st;
	static const struct tstate zero = {};
	bpf_map_update_elem(&tstates, &tid, &zero, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&tstates, &tid);
	if (st)
		st->owner = tid; /* events take their tid from it */
	return st;
}

static __always_inline void state_release(__u32 tid)
{
	__u32 idx = tid & (MT_SLOTS - 1);
	struct tstate *st = bpf_map_lookup_elem(&tslots, &idx);
	if (st && st->owner == tid)
		__sync_val_compare_and_swap(&st->owner, (__u64)tid, 0);
	bpf_map_delete_elem(&tstates, &tid);
}

/* Whether the reader should wake: asked every 32nd event of a thread
 * only, since the query reads the consumer's position, a cache line the
 * reader writes. The reader also polls every PollInterval. */
static __always_inline void submit(void *e, struct tstate *st)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (!st || (++st->nev & 31) == 0) {
		if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
			flags = BPF_RB_FORCE_WAKEUP;
	}
	bpf_ringbuf_submit(e, flags);
}

/* Tells the agent the current thread's process and name, unless it has
 * them already. Returns 0 when the record could not be sent: the caller
 * then drops its event and counts that as lost. */
static __always_inline int send_thread(struct tstate *st)
{
	if (st && st->comm_ok)
		return 1;
	struct mt_thread *t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);
	if (!t)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	t->type = MT_REC_THREAD;
	t->tgid = id >> 32;
	t->tid = (__u32)id;
	bpf_get_current_comm(t->comm, sizeof(t->comm));
	bpf_ringbuf_submit(t, BPF_RB_NO_WAKEUP);
	if (st)
		st->comm_ok = 1;
	return 1;
}

static __always_inline __u32 cur_tid(struct tstate *st)
{
	/* A state's owner is its thread: no helper call needed. */
	return st ? (__u32)st->owner : (__u32)bpf_get_current_pid_tgid();
}

/* Room for an event of n bytes, after the thread's record if it needs
 * one; a failure counts the event lost. */
static __always_inline void *reserve_event(struct tstate *st, __u64 n)
{
	void *e = send_thread(st) ? bpf_ringbuf_reserve(&events, n, 0) : 0;
	if (!e)
		__sync_fetch_and_add(&lost_records, 1);
	return e;
}

/* An event with stack, old_ptr and old_size zero whose pointer, size and
 * flags fit: the 24-byte record. Its time is now, or at when that is not
 * 0. */
static __always_inline void send_packed(struct tstate *st, __u8 kind, __u8 op, __u8 flags, __u64 ptr, __u64 size,
					__u64 at)
{
	struct mt_event_packed *e = reserve_event(st, sizeof(*e));
	if (!e)
		return;
	e->op_ptr = MT_PK_OP_PTR(op, ptr);
	e->ts_ns = at ? at : bpf_ktime_get_ns();
	e->size_tid = MT_PK_SIZE_TID(size, kind, flags, cur_tid(st));
	submit(e, st);
}

static __always_inline struct mt_event *reserve_full(struct tstate *st, __u8 kind, __u8 op, __u8 flags, __u64 ptr,
						     __u64 size, __u64 stack, __u64 old_ptr, __u64 old_size, __u64 at)
{
	struct mt_event *e = reserve_event(st, sizeof(*e));
	if (!e)
		return 0;
	e->type = MT_REC_EVENT;
	e->ts_ns = at ? at : bpf_ktime_get_ns();
	e->tid = cur_tid(st);
	e->kind = kind;
	e->op = op;
	e->flags = flags;
	e->ptr = ptr;
	e->size = size;
	e->stack = stack;
	e->old_ptr = old_ptr;
	e->old_size = old_size;
	return e;
}

static __always_inline void send(struct tstate *st, __u8 kind, __u8 op, __u8 flags, __u64 ptr, __u64 size,
				 __u64 stack, __u64 old_ptr, __u64 old_size, __u64 at)
{
	struct mt_event *e;
	if ((stack | old_ptr | old_size) == 0 && MT_PK_FITS(ptr, size, flags))
		send_packed(st, kind, op, flags, ptr, size, at);
	else if ((e = reserve_full(st, kind, op, flags, ptr, size, stack, old_ptr, old_size, at)))
		submit(e, st);
}

/* mmap, munmap and mremap called from inside libc (malloc's own mmap, a
 * thread stack) are not the program's calls. The return address sits at
 * [sp] at the probe point (before any push), and the cookie carries how far
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
	bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx));
	__u64 ip = PT_REGS_IP(ctx);
	return ret >= ip - before && ret < ip + after;
}

/* --stack-threads: decided once per thread name, not per event. The
 * substring search runs in bpf_loop callbacks so that the verifier checks
 * its body once rather than every unrolled path. The name is held as two
 * words and shifted, never indexed: a byte read from the stack at a
 * variable offset is refused by the verifier (the program failed to load
 * whenever --stack-threads came with --stack-depth). */
struct mt_match_ctx {
	__u64 lo, hi; /* the thread's name, little-endian: byte 0 is lo's low byte */
	int found;
};

static long match_cb(__u64 idx, void *data)
{
	struct mt_match_ctx *m = data;
	__u32 p = (idx >> 4) & 7, start = idx & 15;
	__u64 lo = m->lo, hi = m->hi;
	/* Bytes past the name's 16 shift in as 0, which no pattern byte is. */
	if (start >= 8) {
		lo = hi >> ((start - 8) * 8);
		hi = 0;
	} else if (start > 0) {
		lo = lo >> (start * 8) | hi << (64 - start * 8);
		hi >>= start * 8;
	}
	int i;
	for (i = 0; i < 16; i++) {
		char want = stack_threads[p][i];
		if (want == 0)
			break;
		if ((char)(lo & 0xff) != want)
			return 0;
		lo = lo >> 8 | hi << 56;
		hi >>= 8;
	}
	if (i > 0) {
		m->found = 1;
		return 1;
	}
	return 0;
}

static __always_inline int stack_wanted(struct tstate *st)
{
	if (n_stack_threads == 0)
		return 1;
	/* comm_ok: no rename since the name was last read (mt_rename). */
	if (st->stack_ok && st->comm_ok)
		return st->stack_ok == 1;
	struct mt_match_ctx m = {};
	bpf_get_current_comm(&m.lo, 16);
	if (st->stack_ok && m.lo == st->comm_lo && m.hi == st->comm_hi)
		return st->stack_ok == 1;
	st->comm_lo = m.lo;
	st->comm_hi = m.hi;
	bpf_loop(n_stack_threads * 16, match_cb, &m, 0);
	st->stack_ok = m.found ? 1 : 2;
	return m.found;
}

struct mt_send_ctx {
	struct mt_stack *r;
	struct stackbuf *buf;
	struct task_struct *task;
};

struct mt_vma_out {
	struct mt_frame f;
	struct file *file;
};

#if defined(__TARGET_ARCH_x86)
struct mt_path_ctx {
	struct mt_file *r;
	struct dentry *d;
	struct vfsmount *vmnt;
	int done;
};

/* One step of d_path: name the dentry, go to its parent, and at the root
 * of a mount continue from the mountpoint in the parent mount. */
static long path_cb(__u64 i, void *data)
{
	struct mt_path_ctx *c = data;
	if (i >= MT_PATH_PARTS)
		return 1;
	struct dentry *d = c->d;
	/* Locals, not c->...: BPF_CORE_READ would relocate our own struct. */
	struct vfsmount *vmnt = c->vmnt;
	struct dentry *root = BPF_CORE_READ(vmnt, mnt_root);
	if (d == root) {
		struct mount *m = container_of(vmnt, struct mount, mnt);
		struct mount *parent = BPF_CORE_READ(m, mnt_parent);
		if (parent == m) {
			c->done = 1;
			return 1;
		}
		c->d = BPF_CORE_READ(m, mnt_mountpoint);
		c->vmnt = &parent->mnt;
		return 0; /* no name for a mount root */
	}
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (up == d) {
		c->done = 1;
		return 1;
	}
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	__u32 n = c->r->nparts;
	if (n >= MT_PATH_PARTS)
		return 1;
	long len = bpf_probe_read_kernel_str(c->r->parts[n], MT_PART_LEN, name);
	if (len >= MT_PART_LEN)
		c->r->truncated = 1;
	c->r->nparts = n + 1;
	c->d = up;
	return 0;
}

static __always_inline void send_file(struct file *file, __u64 ino)
{
	if (bpf_map_lookup_elem(&files_sent, &ino))
		return;
	__u8 one = 1;
	bpf_map_update_elem(&files_sent, &ino, &one, BPF_ANY);
	struct mt_file *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&lost_records, 1);
		return;
	}
	r->type = MT_REC_FILE;
	r->ino = ino;
	r->nparts = 0;
	r->truncated = 0;
	struct mt_path_ctx c = {
		.r = r,
		.d = BPF_CORE_READ(file, f_path.dentry),
		.vmnt = BPF_CORE_READ(file, f_path.mnt),
	};
	bpf_loop(MT_PATH_PARTS * 2, path_cb, &c, 0);
	if (!c.done)
		r->truncated = 1;
	submit(r, 0);
}

static long frame_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct mt_vma_out *o = data;
	struct file *file = BPF_CORE_READ(vma, vm_file);
	if (!file) {
		o->f.ino = 0;
		return 0;
	}
	o->file = file;
	o->f.ino = BPF_CORE_READ(file, f_inode, i_ino);
	o->f.fileoff = o->f.addr - BPF_CORE_READ(vma, vm_start) + (BPF_CORE_READ(vma, vm_pgoff) << 12);
	return 0;
}
#endif

static long frame_cb(__u64 i, void *data)
{
	struct mt_send_ctx *c = data;
	if (i >= MT_MAX_FRAMES)
		return 1;
	/* find_vma's context must live on the BPF stack. */
	struct mt_vma_out o = {.f = {.addr = c->buf->ips[i], .ino = ~0ULL}};
#if defined(__TARGET_ARCH_x86)
	bpf_find_vma(c->task, o.f.addr, frame_vma_cb, &o, 0);
	if (o.file)
		send_file(o.file, o.f.ino);
#endif
	c->r->frames[i] = o.f;
	return 0;
}

/* Sends a stack the agent has not seen: each frame with the file and
 * offset it lies in now, and why the walk ended. */
static __always_inline void send_stack(__u64 id, struct stackbuf *buf, __u32 n, __u16 reason)
{
	struct mt_stack *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&lost_records, 1);
		return;
	}
	r->type = MT_REC_STACK;
	r->ts_ns = bpf_ktime_get_ns();
	r->id = id;
	r->tgid = bpf_get_current_pid_tgid() >> 32;
	r->nframes = n;
	r->reason = reason;
	struct mt_send_ctx c = {.r = r, .buf = buf, .task = bpf_get_current_task_btf()};
	bpf_loop(n, frame_cb, &c, 0);
	submit(r, 0);
}

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
#define MT_CHUNK 2048
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
	__u64 chunk_lo;	 /* user address of the chunk's first byte */
	__u32 chunk_len; /* valid bytes in the chunk; 0: none */
	struct mt_umap cur; /* the last frame's mapping: callers are often in it too */
	__u8 have_cur;
	__u8 is_return; /* pc is a return address: its call is at pc - 1 */
	__u8 fp_known;
	__u8 lr_valid;
	__u8 fp_used;
};

struct mt_walk {
	struct stackbuf *buf;
	struct mt_umaps *maps;
	struct mt_chunk *chunk;
	struct mt_wstate s;
	__u32 n;
	__u16 reason;
};

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
__noinline int mt_lookup_rule(struct mt_umap *m, __u64 pc, struct mt_rule *r)
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
	__u64 start, end, pgoff, dev, ino;
	int file;
};

static long fb_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct mt_fb_vma *c = data;
	struct file *f = BPF_CORE_READ(vma, vm_file);
	if (!f)
		return 0;
	c->file = 1;
	c->ino = BPF_CORE_READ(f, f_inode, i_ino);
	c->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	c->start = BPF_CORE_READ(vma, vm_start);
	c->end = BPF_CORE_READ(vma, vm_end);
	c->pgoff = BPF_CORE_READ(vma, vm_pgoff);
	return 0;
}

/* A PC in no mapping of the process's array: a library mapped since the
 * agent last wrote it (dlopen, or ld.so's work after exec). Its VMA names
 * the file, whose table may be built already; the agent is asked, once,
 * to write the mappings again. */
__noinline int mt_fallback_map(__u64 pc, struct mt_umap *out)
{
	if (!out)
		return 0;
	struct mt_fb_vma c = {};
	if (bpf_find_vma(bpf_get_current_task_btf(), pc, fb_vma_cb, &c, 0) || !c.file)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
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
	struct mt_ufile_key key = {.dev = c.dev, .ino = c.ino};
	struct mt_ufile *uf = bpf_map_lookup_elem(&unwind_files, &key);
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
__noinline int mt_find_map(struct mt_umaps *ms, __u64 pc, struct mt_umap *out)
{
	if (!ms || !out)
		return 0;
	__u32 pos = 0;
#pragma unroll
	for (__u32 step = MT_UMAPS / 2; step > 0; step >>= 1) {
		__u64 end = ms->m[(pos + step - 1) & (MT_UMAPS - 1)].end;
		pos += step & (__u32)((__s64)(end - pc - 1) >> 63); /* end <= pc */
	}
	if (pos >= ms->n)
		return 0;
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
	if (bpf_probe_read_user(c->b, MT_CHUNK, (void *)addr) == 0) {
		w->chunk_lo = addr;
		w->chunk_len = MT_CHUNK;
		return;
	}
	__u32 n = 4096 - (addr & 4095);
	if (n > MT_CHUNK)
		n = MT_CHUNK;
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
static __always_inline int stack_read(struct mt_chunk *c, struct mt_wstate *w, __u64 *dst, const __u32 len,
				      __u64 addr)
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
__noinline int mt_step(struct mt_wstate *w, struct mt_umaps *ms, struct mt_chunk *c)
{
	if (!w)
		return MT_STOP_BAD_READ;
	__u64 pc = w->pc, sp = w->sp, fp = w->fp;
	if (!(w->have_cur && pc >= w->cur.start && pc < w->cur.end))
		w->have_cur = (ms && mt_find_map(ms, pc, &w->cur)) || mt_fallback_map(pc, &w->cur);
	struct mt_rule r = {};
	int mapped = w->have_cur && w->cur.t.row_count;
	if (mapped)
		mt_lookup_rule(&w->cur, pc - w->is_return, &r);
	if (r.sig) {
		/* A signal trampoline: the interrupted registers are in the
		 * sigcontext on the stack (unwind.SigAMD64RBP and the like). */
#if defined(__TARGET_ARCH_x86)
		__u64 g[7];
		if (bpf_probe_read_user(g, sizeof(g), (void *)(sp + 40 + 10 * 8)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->fp = g[0];
		w->sp = g[5];
		w->pc = g[6];
#else
		__u64 g[4];
		if (bpf_probe_read_user(g, sizeof(g), (void *)(sp + 128 + 176 + 8 + 29 * 8)))
			return step_stop(w, MT_STOP_BAD_READ);
		w->fp = g[0];
		w->lr = g[1];
		w->sp = g[2];
		w->pc = g[3] & MT_ARM64_PAC_MASK;
#endif
		w->fp_known = 1;
		w->lr_valid = 1;
		w->is_return = 0;
		return 0;
	}
	__u64 cfa = 0, ra = 0;
	switch (r.type) {
	case MT_CFA_END:
		return MT_STOP_END;
	case MT_CFA_UNSUPPORTED:
		return step_stop(w, MT_STOP_NO_INFO);
	case MT_CFA_GAP: {
		/* No rule: the frame pointer, if it looks like one. */
		if (!w->fp_known)
			return step_stop(w, MT_STOP_NO_INFO);
		if (fp == 0)
			return mapped ? MT_STOP_END : step_stop(w, MT_STOP_NO_INFO);
		if (fp < sp || (fp & 7) || fp - sp > MT_FP_SANE)
			return step_stop(w, mapped ? MT_STOP_BAD_READ : MT_STOP_NO_INFO);
		__u64 rec[2];
		if (!stack_read(c, w, rec, 16, fp))
			return step_stop(w, MT_STOP_BAD_READ);
		cfa = fp + 16;
		ra = rec[1];
		w->fp = rec[0];
		w->fp_used = 1;
		break;
	}
	case MT_CFA_SP:
	case MT_CFA_FP:
	case MT_CFA_PLT:
		if (r.type == MT_CFA_FP) {
			if (!w->fp_known)
				return step_stop(w, MT_STOP_NO_INFO);
			cfa = fp + r.cfa_off;
		} else {
			cfa = sp + r.cfa_off;
			if (r.type == MT_CFA_PLT && (pc & 15) >= r.plt)
				cfa += 8;
		}
		if (r.ra_at && r.fp == MT_FP_AT_CFA && r.fp_off == r.ra_off - 8) {
			/* The usual frame record: saved fp, then the return
			 * address, in one read. */
			__u64 rec[2];
			if (!stack_read(c, w, rec, 16, cfa + r.fp_off))
				return step_stop(w, MT_STOP_BAD_READ);
			w->fp = rec[0];
			ra = rec[1];
			break;
		}
		if (r.ra_at) {
			if (!stack_read(c, w, &ra, 8, cfa + r.ra_off))
				return step_stop(w, MT_STOP_BAD_READ);
		} else {
			if (!w->lr_valid)
				return step_stop(w, MT_STOP_BAD_READ);
			ra = w->lr;
		}
		if (r.fp == MT_FP_AT_CFA) {
			__u64 v;
			if (!stack_read(c, w, &v, 8, cfa + r.fp_off))
				return step_stop(w, MT_STOP_BAD_READ);
			w->fp = v;
		} else if (r.fp == MT_FP_UNKNOWN) {
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

static long walk_cb(__u64 i, void *data)
{
	struct mt_walk *w = data;
	if (w->n >= stack_depth || w->n > MT_MAX_FRAMES) {
		w->reason = MT_STOP_DEPTH;
		return 1;
	}
	int stop = mt_step(&w->s, w->maps, w->chunk);
	if (stop) {
		w->reason = stop;
		return 1;
	}
	w->buf->ips[w->n & MT_MAX_FRAMES] = w->s.pc;
	w->n++;
	return 0;
}

/* The walk from the probe: at the allocation function's entry (before
 * any push) the caller's return address is at [sp] on x86-64 and in x30
 * on arm64, and the caller's frame pointer is untouched. */
static __always_inline __u32 dwarf_stack(struct pt_regs *ctx, struct stackbuf *buf, __u16 *reason)
{
	__u32 zero = 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mt_walk w = {
		.buf = buf,
		.maps = bpf_map_lookup_elem(&unwind_procs, &tgid),
		.chunk = bpf_map_lookup_elem(&stack_chunk, &zero),
		.s = {.fp = PT_REGS_FP(ctx), .is_return = 1, .fp_known = 1},
		.reason = MT_STOP_DEPTH,
	};
#if defined(__TARGET_ARCH_x86)
	w.s.sp = PT_REGS_SP(ctx);
	if (!stack_read(w.chunk, &w.s, &w.s.pc, 8, PT_REGS_SP(ctx)))
		return 0;
	w.s.sp = PT_REGS_SP(ctx) + 8;
#else
	w.s.pc = ctx->regs[30] & MT_ARM64_PAC_MASK;
	w.s.sp = PT_REGS_SP(ctx);
#endif
	buf->ips[0] = w.s.pc;
	w.n = 1;
	if (stack_depth > 1)
		bpf_loop(stack_depth, walk_cb, &w, 0);
	*reason = w.n >= stack_depth ? MT_STOP_DEPTH : w.reason;
	return w.n;
}

#if defined(__TARGET_ARCH_x86)
/* The frame-pointer walk (--stack-unwind fp) as the kernel's
 * (perf_callchain_user: follow [fp] and [fp+8] until a read fails, the
 * depth is reached or fp leaves user space), but served from chunks of
 * the stack like the DWARF walk, where bpf_get_stack reads each frame
 * with two faulting user accesses. */
struct mt_fpwalk {
	struct stackbuf *buf;
	struct mt_chunk *chunk;
	struct mt_wstate *s;
	__u32 n;
};

/* The walk's state, off the BPF stack (512 bytes for the whole chain). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_wstate);
} fp_state SEC(".maps");

#define MT_USER_TOP 0x7ffffffff000ULL

/* A frame record (16 bytes at addr) from the chunk, refilled with
 * MT_FP_CHUNK bytes from addr when it is not there: frame-pointer frames
 * are small and a walk's records lie close together, so a refill of the
 * DWARF walk's 2 KiB copied mostly bytes no step reads. */
#define MT_FP_CHUNK 512
static __always_inline int fp_read(struct mt_chunk *c, struct mt_wstate *w, __u64 *dst, __u64 addr)
{
	if (!c)
		return bpf_probe_read_user(dst, 16, (void *)addr) == 0;
	__u64 off = addr - w->chunk_lo;
	if (!(off < w->chunk_len && w->chunk_len - off >= 16)) {
		w->chunk_len = 0;
		__u32 n = MT_FP_CHUNK;
		if (bpf_probe_read_user(c->b, MT_FP_CHUNK, (void *)addr) != 0) {
			n = 4096 - (addr & 4095);
			if (n > MT_FP_CHUNK)
				n = MT_FP_CHUNK;
			if (n < 16 || bpf_probe_read_user(c->b, n & (MT_FP_CHUNK * 2 - 1), (void *)addr) != 0)
				return bpf_probe_read_user(dst, 16, (void *)addr) == 0;
		}
		w->chunk_lo = addr;
		w->chunk_len = n;
		off = 0;
	}
	if (off <= MT_CHUNK - 16 && off + 16 <= w->chunk_len) {
		dst[0] = *(__u64 *)(c->b + off);
		dst[1] = *(__u64 *)(c->b + off + 8);
		return 1;
	}
	return bpf_probe_read_user(dst, 16, (void *)addr) == 0;
}

/* One frame record: the caller's return address in *ra, or 0 at the end.
 * A global function, verified once rather than along the loop. */
__noinline int mt_fp_step(struct mt_wstate *w, struct mt_chunk *c, __u64 *ra)
{
	if (!w || !ra)
		return 0;
	__u64 fp = w->fp;
	/* The kernel's walk goes on until a read faults; past code
	 * without frame pointers (libc's __libc_start_call_main under
	 * main) that is garbage, each a fill of its own here. A frame
	 * record stays above the last one and within MT_FP_SANE of the
	 * stack pointer: the frames kept are the kernel's, its garbage
	 * after them cut (the agent cut it at a root or a frame in no
	 * file anyway). */
	if (fp == 0 || fp > MT_USER_TOP - 16 || fp < w->lr || fp - w->sp > MT_FP_SANE)
		return 0;
	__u64 rec[2];
	if (!fp_read(c, w, rec, fp))
		return 0;
	*ra = rec[1];
	w->fp = rec[0];
	w->lr = fp + 16; /* the next record lies above this one */
	return 1;
}

static long fp_cb(__u64 i, void *data)
{
	struct mt_fpwalk *w = data;
	if (w->n >= stack_depth || w->n > MT_MAX_FRAMES)
		return 1;
	__u64 ra = 0;
	if (!mt_fp_step(w->s, w->chunk, &ra))
		return 1;
	w->buf->ips[w->n & MT_MAX_FRAMES] = ra;
	w->n++;
	return 0;
}

/* Its own frame, not the capture's: the call chain's stack is at most
 * 512 bytes, and the DWARF walk's state is on the other branch. */
static __noinline __u32 fp_stack(struct pt_regs *ctx, struct stackbuf *buf)
{
	__u32 zero = 0;
	struct mt_fpwalk w = {
		.buf = buf,
		.chunk = bpf_map_lookup_elem(&stack_chunk, &zero),
		.s = bpf_map_lookup_elem(&fp_state, &zero),
	};
	if (!w.s)
		return 0;
	__builtin_memset(w.s, 0, sizeof(*w.s));
	w.s->sp = PT_REGS_SP(ctx);
	w.s->fp = PT_REGS_FP(ctx);
	w.s->lr = PT_REGS_SP(ctx); /* here: the lowest next frame record */
	__u64 top[2];
	if (!fp_read(w.chunk, w.s, top, PT_REGS_SP(ctx)))
		return 0;
	buf->ips[0] = top[0];
	w.n = 1;
	if (stack_depth > 1)
		bpf_loop(stack_depth, fp_cb, &w, 0);
	return w.n;
}
#endif

struct mt_hash_ctx {
	struct stackbuf *buf;
	__u64 id;
};

/* Eight frames a call: a callback per frame cost 60-100 ns a stack more
 * than the loop inline, which the verifier unrolls (100 thousand
 * instructions a program). */
static long hash_cb(__u64 i, void *data)
{
	struct mt_hash_ctx *h = data;
	__u64 id = h->id;
	for (__u32 k = 0; k < 8; k++) {
		__u32 j = i * 8 + k;
		if (j >= h->buf->n)
			break;
		id = (id ^ h->buf->ips[j & MT_MAX_FRAMES]) * 0x100000001b3ULL;
	}
	h->id = id;
	return 0;
}

/* The user stack at an outermost call, frame 0 being the caller: the
 * DWARF walk, or (unwind_dwarf 0) the return address at the probe plus
 * the kernel's frame-pointer walk from the caller's frame pointer.
 * Returns the stack's id, or 0. A global function, so that the verifier
 * checks it once per program instead of at every call site with every
 * caller's state (inlined, it was 400-600 thousand instructions a program
 * and most of a second of start-up each). */
__noinline __u64 mt_capture_stack(struct pt_regs *ctx)
{
	__u32 zero = 0;
	struct stackbuf *buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!buf || !ctx)
		return 0;
	__u32 n = 0;
	__u16 reason = MT_STOP_FPWALK;
	if (unwind_dwarf) {
		n = dwarf_stack(ctx, buf, &reason);
		if (n == 0)
			return 0;
	} else {
#if defined(__TARGET_ARCH_x86)
		n = fp_stack(ctx, buf);
		if (n == 0)
			return 0;
#else
		/* arm64 keeps the kernel's walk, whose checks (aligned,
		 * rising frame records) this one would have to match. */
		buf->ips[0] = ctx->regs[30] & MT_ARM64_PAC_MASK;
		n = 1;
		if (stack_depth > 1) {
			/* Skip frame 0 of the walk: the allocation function itself. */
			long got = bpf_get_stack(ctx, &buf->ips[1], (stack_depth - 1) * 8 & 0x3ff,
						 BPF_F_USER_STACK | 1);
			if (got > 0)
				n += got / 8;
		}
#endif
	}
	if (n > MT_MAX_FRAMES)
		n = MT_MAX_FRAMES;
	buf->n = n;
	struct mt_hash_ctx h = {.buf = buf, .id = 0xcbf29ce484222325ULL ^ (bpf_get_current_pid_tgid() >> 32)};
	bpf_loop((n + 7) / 8, hash_cb, &h, 0);
	__u64 id = h.id | 1; /* never 0 */
	if (!bpf_map_lookup_elem(&stacks_sent, &id)) {
		__u8 one = 1;
		bpf_map_update_elem(&stacks_sent, &id, &one, BPF_ANY);
		send_stack(id, buf, n, reason);
	}
	return id;
}

static __always_inline __u64 capture_stack(struct pt_regs *ctx, struct tstate *st)
{
	if (stack_depth == 0 || !stack_wanted(st))
		return 0;
	return mt_capture_stack(ctx);
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
	/* find_vma only try-locks the mm; when another thread holds it, the
	 * absolute address goes instead (callsite_ino = -1) and the agent
	 * names it from its record of the process's mappings. */
	if (bpf_find_vma(bpf_get_current_task_btf(), c.addr, vma_cb, &c, 0) || !c.ino) {
		*off = c.addr;
		*ino = (__u64)-1;
		return;
	}
	*off = c.fileoff;
	*ino = c.ino;
#endif
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
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct alloc_text *at = bpf_map_lookup_elem(&alloc_texts, &tgid);
	if (at) {
		for (int i = 0; i < MT_ALLOC_RANGES; i++)
			if (ra >= at->lo[i] && ra < at->hi[i])
				return 1;
	}
	struct ino_ctx c = {};
	if (bpf_find_vma(bpf_get_current_task_btf(), ra, ino_cb, &c, 0) || !c.ino)
		return 0;
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
	bpf_loop(1 << 16, strlen_cb, &c, 0);
	return c.n;
}

/* Whether the operator new marked in st is still running: its return
 * address is still where its call put it. A new left by an exception
 * (bad_alloc, caught by the program) never returned, and a later call
 * from a deeper frame must not be taken for one made inside it (jemalloc's
 * first aligned new was logged with the size of an earlier plain new). */
static __always_inline int ovr_live(struct tstate *st, __u64 sp)
{
	if (!st->ovr_op)
		return 0;
	if (sp > st->ovr_sp) {
		st->ovr_op = 0;
		return 0;
	}
	__u64 ra = 0;
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)st->ovr_sp) || ra != st->ovr_ret) {
		st->ovr_op = 0;
		return 0;
	}
	return 1;
}

/* The uprobe programs do not consult the targets map: every link is
 * PID-filtered, so the kernel runs them for the traced processes only (a
 * forked child's inherited breakpoints are removed on its first hit). */
static __always_inline int do_enter(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
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
		if (st->depth == 1 && sig == MT_SIG_SIZE0 && op == MT_OP_MALLOC &&
		    st->sig == MT_SIG_STRDUP)
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
		} else if (size >= st->ovr_size && sig != MT_SIG_MMAP && sig != MT_SIG_MREMAP && ovr_live(st, sp)) {
			op = st->ovr_op;
			size = st->ovr_size;
			st->stack = st->ovr_stack;
			under_new = 1;
			st->ovr_op = 0;
		}
	}
	if (!under_new)
		st->stack = capture_stack(ctx, st);
	st->callsite_ino = 0;
	if (under_new) {
		st->callsite = st->ovr_callsite;
		st->callsite_ino = st->ovr_callsite_ino;
	} else if (op == MT_OP_ALIGNED_ALLOC ||
		   (sig != MT_SIG_MMAP && sig != MT_SIG_MREMAP && MT_CK(cookie, ALIAS))) {
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct tstate *st = state(1);
	if (!st)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	if (st->depth > 0 && sp <= st->outer_sp)
		return 0;
	__u64 ra = caller_ra(ctx);
	if (ovr_live(st, sp)) {
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
		send(st, MT_EV_FREE, free_op, 0, st->arg_ptr, old_len, st->stack, 0, 0, st->entry_ts);
		kind = MT_EV_ALLOC;
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
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
SEC("uprobe") int mt_enter(struct pt_regs *ctx) { return do_enter(ctx); }
SEC("uprobe.multi") int mt_enter_multi(struct pt_regs *ctx) { return do_enter(ctx); }
SEC("uretprobe") int mt_return(struct pt_regs *ctx) { return do_return(ctx); }
SEC("uretprobe.multi") int mt_return_multi(struct pt_regs *ctx) { return do_return(ctx); }

/* A session uprobe (kernels with BPF_TRACE_UPROBE_SESSION): one consumer
 * serves the entry and the return of each call, instead of two links. */
SEC("uprobe.session") int mt_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return())
		return do_return(ctx);
	do_enter(ctx);
	return 0;
}
SEC("uprobe") int mt_free(struct pt_regs *ctx) { return do_free(ctx); }
SEC("uprobe") int mt_new(struct pt_regs *ctx) { return do_new(ctx); }
SEC("uprobe.multi") int mt_new_multi(struct pt_regs *ctx) { return do_new(ctx); }
SEC("uprobe.multi") int mt_free_multi(struct pt_regs *ctx) { return do_free(ctx); }
SEC("uprobe") int mt_new_ret(struct pt_regs *ctx) { return do_new_ret(ctx); }
SEC("uprobe.multi") int mt_new_ret_multi(struct pt_regs *ctx) { return do_new_ret(ctx); }

/* A thread was renamed (prctl, pthread_setname_np, /proc/.../comm, exec):
 * its next event reads the name again. */
SEC("tp_btf/task_rename")
int BPF_PROG(mt_rename, struct task_struct *task)
{
	__u32 tid = BPF_CORE_READ(task, pid);
	__u32 idx = tid & (MT_SLOTS - 1);
	struct tstate *st = bpf_map_lookup_elem(&tslots, &idx);
	if (st && st->owner == tid)
		st->comm_ok = 0;
	st = bpf_map_lookup_elem(&tstates, &tid);
	if (st)
		st->comm_ok = 0;
	return 0;
}

/* A process record: fork, exec or a thread's exit. These decide how a
 * process's run ended, so when the ring buffer is full they wait in the
 * backlog queue instead of being lost; only a full queue loses one, which
 * is counted. wake: the agent must act now (a held process waits for it). */
static __always_inline int send_proc(__u8 kind, __u8 flags, __u64 ptr, __u64 size, bool wake)
{
	struct mt_event *e = send_thread(0) ? bpf_ringbuf_reserve(&events, sizeof(*e), 0) : 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	if (e) {
		e->type = MT_REC_EVENT;
		e->ts_ns = now;
		e->tid = (__u32)id;
		e->kind = kind;
		e->op = 0;
		e->flags = flags;
		e->ptr = ptr;
		e->size = size;
		e->stack = 0;
		e->old_ptr = 0;
		e->old_size = 0;
		if (wake)
			bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
		else
			submit(e, 0);
		return 1;
	}
	struct mt_backlog b = {};
	b.thread.type = MT_REC_THREAD;
	b.thread.tgid = id >> 32;
	b.thread.tid = (__u32)id;
	bpf_get_current_comm(b.thread.comm, sizeof(b.thread.comm));
	b.ev.type = MT_REC_EVENT;
	b.ev.ts_ns = now;
	b.ev.tid = (__u32)id;
	b.ev.kind = kind;
	b.ev.flags = flags;
	b.ev.ptr = ptr;
	b.ev.size = size;
	if (bpf_map_push_elem(&backlog, &b, 0)) {
		__sync_fetch_and_add(&lost_records, 1);
		return 0;
	}
	return 1;
}

/* hold_new records a hold of the current process of kind (exec, dlopen)
 * under a key of its own (see MT_HOLD_KEY), or returns 0. */
static __always_inline __u32 hold_new(__u32 tgid, __u32 kind)
{
	if (__sync_fetch_and_add(&released, 0))
		return 0;
	__u8 stopped = HOLD_STOPPED;
	__u32 seq = bpf_ktime_get_ns() >> 10;
	for (int i = 0; i < 4; i++) {
		__u32 key = MT_HOLD_KEY(tgid, kind, seq + i);
		if (bpf_map_update_elem(&hold, &key, &stopped, BPF_NOEXIST) == 0)
			return key;
	}
	return 0;
}

/* hold_self stops the current process, whose hold is recorded under key,
 * unless memtrace has released its holds (released). The two reads of
 * released pair with agent_exit's write and sweep (a full barrier on each
 * side): if this stop is not seen by the sweep, released is seen here,
 * and the process continues itself. A SIGCONT cancels a pending SIGSTOP. */
static __always_inline void hold_self(__u32 key)
{
	if (__sync_fetch_and_add(&released, 0)) {
		bpf_map_delete_elem(&hold, &key);
		return;
	}
	bpf_send_signal_thread(MT_SIGSTOP);
	if (__sync_fetch_and_add(&released, 0)) {
		bpf_send_signal_thread(MT_SIGCONT);
		bpf_map_delete_elem(&hold, &key);
	}
}

static long release_one(struct bpf_map *map, __u32 *key, __u8 *state, void *ctx)
{
	if (*state == HOLD_STOPPED) {
		struct task_struct *t = bpf_task_from_pid(*key & MT_HOLD_PID_MASK);
		if (t) {
			bpf_send_signal_task(t, MT_SIGCONT, PIDTYPE_TGID, 0);
			bpf_task_release(t);
		}
	}
	bpf_map_delete_elem(map, key);
	return 0;
}

/* memtrace is exiting, however it ends (a return, a panic, SIGKILL): its
 * programs still run, since its descriptors close after this tracepoint.
 * Every process it holds is let go here, by the kernel, with no process
 * of memtrace's needed. */
static __always_inline void agent_exit(void)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	/* Only once its last thread is exiting. */
	if (BPF_CORE_READ(cur, signal, live.counter) != 0)
		return;
	__sync_fetch_and_or(&released, 1);
	if (bpf_send_signal_task && bpf_task_from_pid && bpf_task_release)
		bpf_for_each_map_elem(&hold, release_one, 0, 0);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(mt_exit)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (agent_tgid && tgid == agent_tgid) {
		agent_exit();
		return 0;
	}
	if (!is_target())
		return 0;
	state_release(bpf_get_current_pid_tgid());
	send_proc(MT_EV_EXIT, 0, 0, 0, false);
	return 0;
}

/* A traced process forked: with --follow the child is traced too. Its
 * probes are PID-filtered links the agent creates, so the child is held
 * (stopped before its first user instruction, see mt_child_start) until
 * they exist, or its first allocations would be missed. Threads are not
 * processes and need nothing. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(mt_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!follow)
		return 0;
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	__u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid)
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	/* The child's mappings are its parent's, until the agent writes them. */
	if (unwind_dwarf) {
		struct mt_umaps *pm = bpf_map_lookup_elem(&unwind_procs, &ptgid);
		if (pm)
			bpf_map_update_elem(&unwind_procs, &ctgid, pm, BPF_ANY);
	}
	/* Runs in the parent, before the child can run: the record names
	 * ptgid. The child is held only when the record that makes the agent
	 * resume it was sent. */
	__u32 key = MT_HOLD_KEY(ctgid, MT_HOLD_FORK, 0);
	__u8 pending = HOLD_PENDING, flags = 0;
	if (!__sync_fetch_and_add(&released, 0) && bpf_map_update_elem(&hold, &key, &pending, BPF_ANY) == 0)
		flags = MT_FLAG_HELD;
	if (!send_proc(MT_EV_FORK, flags, ctgid, flags ? key : 0, true) && flags)
		bpf_map_delete_elem(&hold, &key);
	return 0;
}

/* The child's first moment in its own context is its return from the
 * fork system call. Attached only with --follow, since it runs at every
 * system call's exit. */
SEC("raw_tp/sys_exit")
int BPF_PROG(mt_child_start)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 key = MT_HOLD_KEY(tgid, MT_HOLD_FORK, 0);
	__u8 *h = bpf_map_lookup_elem(&hold, &key);
	if (!h || *h != HOLD_PENDING)
		return 0;
	/* Recorded before the stop: the release sweeps must know of it. */
	*h = HOLD_STOPPED;
	hold_self(key);
	return 0;
}

/* A traced process exec'd: its new image may link other allocators. With
 * --follow it is held until the agent has probed them. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(mt_exec)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	/* A new image: the old mappings mean nothing now, and the first
	 * miss asks the agent for the new ones. */
	if (unwind_dwarf) {
		bpf_map_delete_elem(&unwind_procs, &tgid);
		bpf_map_delete_elem(&unwind_stale, &tgid);
	}
	bpf_map_delete_elem(&alloc_texts, &tgid);
	/* The stop is recorded (for the release sweeps) and sent before the
	 * record that makes the agent resume it, whose SIGCONT could otherwise
	 * come first; a record that could not be sent undoes it: a process is
	 * never held by a record that was lost. */
	__u32 key = (follow || hold_exec) ? hold_new(tgid, MT_HOLD_EXEC) : 0;
	if (key)
		hold_self(key);
	if (!send_proc(MT_EV_EXEC, key ? MT_FLAG_HELD : 0, 0, key, true) && key) {
		bpf_send_signal_thread(MT_SIGCONT);
		bpf_map_delete_elem(&hold, &key);
	}
	return 0;
}

/* ld.so calls _dl_debug_state (the debuggers' hook) after each change to
 * its list of objects; with r_debug.r_state RT_CONSISTENT a dlopen'ed
 * library is mapped and none of its code has run. The process is held
 * there, as at exec, until the agent has written its table and mappings
 * (mt_remap.held): stacks through the library are whole from its first
 * call. The cookie is the address of r_state. */
SEC("uprobe") int mt_dl_state(struct pt_regs *ctx)
{
	if (!unwind_dwarf)
		return 0;
	__u64 at = bpf_get_attach_cookie(ctx);
	int state = -1;
	if (!at || bpf_probe_read_user(&state, sizeof(state), (void *)at) || state != 0 /* RT_CONSISTENT */)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mt_remap *rm = bpf_ringbuf_reserve(&events, sizeof(*rm), 0);
	if (!rm)
		return 0;
	/* Stopped before the record is visible, as at exec. */
	__u32 key = hold_new(tgid, MT_HOLD_DL);
	if (key)
		hold_self(key);
	rm->type = MT_REC_REMAP;
	rm->tgid = tgid;
	rm->held = key != 0;
	rm->hold_key = key;
	bpf_ringbuf_submit(rm, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* Empty programs on the same probe points: the floor that benchmarks
 * compare against. */
SEC("uprobe") int mt_empty(struct pt_regs *ctx) { return 0; }
SEC("uprobe.multi") int mt_empty_multi(struct pt_regs *ctx) { return 0; }
SEC("uprobe.session") int mt_empty_session(struct pt_regs *ctx) { return 0; }

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
SEC("uprobe") int mt_floor_stack(struct pt_regs *ctx) { return floor_stack(ctx); }
SEC("uprobe.multi") int mt_floor_stack_multi(struct pt_regs *ctx) { return floor_stack(ctx); }
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
