/* SPDX-License-Identifier: GPL-2.0 */
/* Processes: thread names; fork, exec and exit records, which are never
 * lost; and the holds (docs/holds.md): a process stopped until the agent
 * has probed it, released however memtrace ends.
 * Part of memtrace.bpf.c, which includes it once, in order. */

/* kfuncs of the release at memtrace's exit (bpf_send_signal_task: Linux
 * 6.13+); where they are missing, memtrace's watchdog process releases. */
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, u64 value) __ksym __weak;
/* A hold's pid is memtrace's namespace's (mt_pidns.h): found there, from
 * memtrace's exiting thread, in a namespace of its own (Linux 6.13+). */
extern struct task_struct *bpf_task_from_vpid(s32 vpid) __ksym __weak;

/* Processes the kernel side stops for the agent: HOLD_PENDING, a forked
 * child to stop at its first instruction; HOLD_STOPPED, stopped and waiting
 * for the agent's SIGCONT; HOLD_RESUMING, being let go (the agent marks a
 * hold so, then sends its SIGCONT, then deletes the entry: a memtrace that
 * dies between any two of those steps leaves an entry every release sweep
 * still resumes). The release at memtrace's exit (or its watchdog)
 * resumes every stopped or resuming process, so no stop can outlive it. */
#define HOLD_PENDING 1
#define HOLD_STOPPED 2
#define HOLD_RESUMING 3
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

/* A thread was renamed (prctl, pthread_setname_np, /proc/.../comm, exec):
 * its next event reads the name again. */
SEC("tp_btf/task_rename")
int BPF_PROG(mt_rename, struct task_struct *task)
{
	__u32 tid = mt_task_pid(task);
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
	__u64 id = mt_pid_tgid();
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
	if (mt_load_fenced(released))
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
	if (mt_load_fenced(released)) {
		bpf_map_delete_elem(&hold, &key);
		return;
	}
	bpf_send_signal_thread(MT_SIGSTOP);
	if (mt_load_fenced(released)) {
		/* A SIGCONT the kernel refused (its per-CPU signal work
		 * busy) leaves the entry for the watchdog's sweeps. */
		if (bpf_send_signal_thread(MT_SIGCONT) == 0)
			bpf_map_delete_elem(&hold, &key);
		return;
	}
	/* The agent resumes a hold by marking it HOLD_RESUMING (or a sweep
	 * takes it), then sending SIGCONT. A resume that did so before this
	 * point may have sent its SIGCONT before the SIGSTOP above, which it
	 * then cannot cancel: seen here, the process continues itself. A
	 * resume that marks it later sends its SIGCONT after the SIGSTOP. */
	__u8 *h = bpf_map_lookup_elem(&hold, &key);
	if (!h || *h == HOLD_RESUMING)
		bpf_send_signal_thread(MT_SIGCONT);
}

#ifndef MT_COMPAT
static long release_one(struct bpf_map *map, __u32 *key, __u8 *state, void *ctx)
{
	if (*state == HOLD_STOPPED || *state == HOLD_RESUMING) {
		__u32 pid = *key & MT_HOLD_PID_MASK;
		struct task_struct *t = pidns_ino ? bpf_task_from_vpid(pid) : bpf_task_from_pid(pid);
		if (t) {
			int err = bpf_send_signal_task(t, MT_SIGCONT, PIDTYPE_TGID, 0);
			bpf_task_release(t);
			/* Refused (the per-CPU signal work busy): the entry
			 * stays for the watchdog's sweeps and the next
			 * exiting thread's. */
			if (err)
				return 0;
		}
	}
	bpf_map_delete_elem(map, key);
	return 0;
}
#endif

/* memtrace is exiting, however it ends (a return, a panic, SIGKILL): its
 * programs still run, since its descriptors close after this tracepoint.
 * Every process it holds is let go here, by the kernel, with no process
 * of memtrace's needed. */
static __always_inline void agent_exit(void)
{
	struct task_struct *cur = mt_current_task();
	/* Only once its last thread is exiting. */
	if (BPF_CORE_READ(cur, signal, live.counter) != 0)
		return;
	mt_set_flag(released);
#ifndef MT_COMPAT
	if (bpf_send_signal_task && bpf_task_from_pid && bpf_task_release && (!pidns_ino || bpf_task_from_vpid))
		bpf_for_each_map_elem(&hold, release_one, 0, 0);
#endif
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(mt_exit)
{
	__u32 tgid = mt_pid_tgid() >> 32;
	if (agent_tgid && tgid == agent_tgid) {
		agent_exit();
		return 0;
	}
	if (!is_target())
		return 0;
	state_release(mt_pid_tgid());
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
	__u32 ptgid = mt_task_tgid(parent);
	if (!bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	__u32 cpid = mt_task_pid(child), ctgid = mt_task_tgid(child);
	if (cpid != ctgid || !ctgid)
		return 0;
	if (!follow) {
		/* Not traced, but said: a log that leaves out a child's
		 * allocations must not read as a complete one. */
		send_proc(MT_EV_FORK, MT_FLAG_UNFOLLOWED, ctgid, 0, false);
		return 0;
	}
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
	if (!mt_load_fenced(released) && bpf_map_update_elem(&hold, &key, &pending, BPF_ANY) == 0)
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
	__u32 tgid = mt_pid_tgid() >> 32;
	__u32 key = MT_HOLD_KEY(tgid, MT_HOLD_FORK, 0);
	__u8 *h = bpf_map_lookup_elem(&hold, &key);
	if (!h || *h != HOLD_PENDING)
		return 0;
	/* Recorded before the stop: the release sweeps must know of it. */
	*h = HOLD_STOPPED;
	hold_self(key);
	return 0;
}

/* selected says whether the current process, which has just exec'd and
 * is not a target, is one --comm, --cgroup or --all asks for. It runs at
 * every exec on the host while a selector is given: a lookup of the comm
 * and a few cgroup ids, nothing on any other path. */
static __always_inline bool selected(__u32 tgid)
{
	if (!select_on || !tgid || tgid == agent_tgid)
		return false;
	/* Nor memtrace's own children (the dynamic linker it runs to list a
	 * program's libraries, from the very loop that would resume them). */
	struct task_struct *cur = mt_current_task();
	if (agent_tgid && mt_task_tgid(BPF_CORE_READ(cur, real_parent)) == agent_tgid)
		return false;
	if (select_all)
		return true;
	char comm[16] = {};
	bpf_get_current_comm(comm, sizeof(comm));
	if (bpf_map_lookup_elem(&select_comms, comm))
		return true;
	for (__u32 i = 0; i < 8; i++) {
		if (i >= n_select_cgroups)
			break;
		if (bpf_get_current_ancestor_cgroup_id((int)select_cgroups[i][1]) == select_cgroups[i][0])
			return true;
	}
	return false;
}

/* A traced process exec'd: its new image may link other allocators. With
 * --follow it is held until the agent has probed them. A process a
 * selector asks for becomes a target here and is held the same way, so
 * that its first allocation is traced; the agent tells it from a target's
 * exec by its pid, which it has not seen. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(mt_exec)
{
	__u32 tgid = mt_pid_tgid() >> 32;
	bool sel = false;
	if (!bpf_map_lookup_elem(&targets, &tgid)) {
		if (!selected(tgid))
			return 0;
		__u8 one = 1;
		if (bpf_map_update_elem(&targets, &tgid, &one, BPF_ANY))
			return 0;
		sel = true;
	}
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
	__u32 key = (follow || hold_exec || sel) ? hold_new(tgid, MT_HOLD_EXEC) : 0;
	if (key)
		hold_self(key);
	if (!send_proc(MT_EV_EXEC, key ? MT_FLAG_HELD : 0, 0, key, true)) {
		if (key) {
			bpf_send_signal_thread(MT_SIGCONT);
			bpf_map_delete_elem(&hold, &key);
		}
		/* The agent will never hear of it: not a target. */
		if (sel)
			bpf_map_delete_elem(&targets, &tgid);
	}
	return 0;
}

/* ld.so calls _dl_debug_state (the debuggers' hook) after each change to
 * its list of objects; with r_debug.r_state RT_CONSISTENT a dlopen'ed
 * library is mapped and none of its code has run. The process is held
 * there, as at exec, until the agent has written its table and mappings
 * (mt_remap.held): stacks through the library are whole from its first
 * call. The cookie is the address of r_state. */
static __always_inline int dl_state(struct pt_regs *ctx)
{
	if (!unwind_dwarf)
		return 0;
	__u64 at = mt_cookie(ctx);
	int state = -1;
	if (!at || bpf_probe_read_user(&state, sizeof(state), (void *)at) || state != 0 /* RT_CONSISTENT */)
		return 0;
	__u32 tgid = mt_pid_tgid() >> 32;
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

SEC("uprobe") int mt_dl_state(struct pt_regs *ctx)
{
	return dl_state(ctx);
}

/* The same through a uprobe_multi link where the kernel has them: closing
 * a classic (perf) uprobe waits for grace periods under the kernel's
 * event_mutex, which every new classic uprobe also takes, so under
 * --follow each child's hook waited for the last one's close. */
SEC("uprobe.multi") int mt_dl_state_multi(struct pt_regs *ctx)
{
	return dl_state(ctx);
}
