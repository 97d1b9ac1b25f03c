/* SPDX-License-Identifier: GPL-2.0 */
/* memtrace's kernel side: its settings, the ring buffer, the process filter
 * and the per-thread state of calls in progress.
 * Part of memtrace.bpf.c, which includes it once, in order. */

#include "mt_compat.h"
#include "mt_pidns.h"

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
/* --comm, --cgroup, --all (docs/fleet.md): a process that execs and
 * matches becomes a target at its exec (mt_exec), held until the agent
 * has probed it. select_all takes every process but memtrace; n_select_cgroups
 * of select_cgroups are (cgroup id, level) pairs, a process matching when
 * its ancestor at that level is that cgroup; select_comms holds the comms. */
const volatile __u8 select_all = 0;
const volatile __u8 select_on = 0;
const volatile __u32 n_select_cgroups = 0;
const volatile __u64 select_cgroups[8][2] = {};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, char[16]);
	__type(value, __u8);
} select_comms SEC(".maps");
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
	__u64 sample_left;   /* --sample: bytes until the next sample (mt_sample.h) */
	__u8 stack_ok;       /* 1: capture, 2: do not */
	__u8 comm_ok;        /* the agent has the thread's current name */
	__u32 nev;           /* events sent: paces the wake-up test */
	__u32 depth;
	__u8 op;
	__u8 sig;
	__u8 ovr_op;
	__u8 flags;
	__u8 sample_init;    /* sample_left drawn */
	__u8 sampled;        /* the outermost call is a sample */
	__u8 ovr_sampled;    /* the operator new in progress is */
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
	__u32 tgid = mt_pid_tgid() >> 32;
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
	__u32 tid = mt_pid_tgid();
	struct tstate *st = 0;
#ifndef MT_COMPAT
	/* Without compare-and-swap (5.12) no slot can be claimed: the hash
	 * alone, in the compat build. */
	__u32 idx = tid & (MT_SLOTS - 1);
	st = bpf_map_lookup_elem(&tslots, &idx);
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
			st->sample_init = 0;
			return st;
		}
	}
#endif
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
#ifndef MT_COMPAT
	__u32 idx = tid & (MT_SLOTS - 1);
	struct tstate *st = bpf_map_lookup_elem(&tslots, &idx);
	if (st && st->owner == tid)
		__sync_val_compare_and_swap(&st->owner, (__u64)tid, 0);
#endif
	bpf_map_delete_elem(&tstates, &tid);
}
