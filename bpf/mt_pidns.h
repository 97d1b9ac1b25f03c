/* SPDX-License-Identifier: GPL-2.0 */
/* Process ids in memtrace's own PID namespace: the one translation of the
 * kernel's ids. memtrace reads /proc, signals, attaches and prints with
 * the ids of its namespace (a container's, kubectl debug's, a sidecar's),
 * while the kernel's own ids (bpf_get_current_pid_tgid, task->pid and
 * ->tgid, the tracepoints' tasks) are the initial namespace's. Every id the
 * kernel side reports, keys a map by or compares is made here: the
 * current thread's by mt_pid_tgid, another task's by mt_task_pid and
 * mt_task_tgid. A process memtrace's namespace does not see has id 0,
 * which is never a target.
 * Included by mt_state.h, in both objects. */

/* memtrace's PID namespace (the device and inode of /proc/self/ns/pid),
 * set by the loader when it is not the initial one; 0: the initial
 * namespace, where the kernel's ids are memtrace's and nothing is
 * translated. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* The kernel nests PID namespaces at most this deep (MAX_PID_NS_LEVEL). */
#define MT_PIDNS_LEVELS 32

/* CO-RE flavours of the kernel types walked, matched by name against the
 * running kernel's BTF (the arm64 vmlinux.h has none of them). */
struct ns_common___mt {
	unsigned int inum;
} __attribute__((preserve_access_index));
struct pid_namespace___mt {
	struct ns_common___mt ns;
} __attribute__((preserve_access_index));
struct upid___mt {
	int nr;
	struct pid_namespace___mt *ns;
} __attribute__((preserve_access_index));
struct pid___mt {
	unsigned int level;
	struct upid___mt numbers[1];
} __attribute__((preserve_access_index));
struct signal_struct___mt {
	struct pid___mt *pids[2]; /* [PIDTYPE_TGID] */
} __attribute__((preserve_access_index));
struct task_struct___mt {
	struct pid___mt *thread_pid;
	struct signal_struct___mt *signal;
} __attribute__((preserve_access_index));

/* mt_ns_ids is a thread's ids in memtrace's namespace, tgid << 32 | pid
 * (the kernel's task_tgid_nr_ns, task_pid_nr_ns), 0 for an id it does not
 * have there: the thread's struct pid and its group's (their addresses),
 * or with 0, 0 the current thread. The helper answers for a thread of
 * memtrace's namespace itself (struct bpf_pidns_info read as one
 * little-endian word). Any other is found in its struct pid's numbers, one
 * per namespace from the initial one down to the thread's own (a thread's
 * and its group's alike): memtrace's is the one whose namespace has its
 * inode, searched from the deepest (a thread of a namespace nested in
 * memtrace's, such as a sandbox's or a container's the traced program
 * starts, is found a level or two up). A global function: verified once,
 * not at each of its callers, with one 8-byte slot of stack, since some
 * of them sit under the stack walk's frames with little of the 512 bytes
 * left. */
__noinline __u64 mt_ns_ids(__u64 pid, __u64 group)
{
	/* Every read goes through v, or group's slot; one return, of v. */
	__u64 v = 0;
	if (!pid) {
		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, (void *)&v, sizeof(v)) == 0)
			goto out;
		struct task_struct___mt *task = (void *)bpf_get_current_task();
		if (bpf_core_read(&v, sizeof(v), &task->signal) || !v ||
		    bpf_core_read(&group, sizeof(group), &((struct signal_struct___mt *)v)->pids[1]) ||
		    bpf_core_read(&v, sizeof(v), &task->thread_pid))
			goto none;
		pid = v;
	}
	if (!pid || bpf_probe_read_kernel(&v, 4, (void *)(pid + bpf_core_field_offset(struct pid___mt, level))))
		goto none;
	__u32 level = (__u32)v;
	for (__u32 i = 0; i < MT_PIDNS_LEVELS; i++) {
		/* i stays the verifier's known count, not a trip count
		 * derived from level, which it could not bound. */
		barrier_var(i);
		if (i > level)
			break;
		__u64 at = bpf_core_field_offset(struct pid___mt, numbers) +
			   (level - i) * bpf_core_type_size(struct upid___mt);
		if (bpf_probe_read_kernel(&v, 8, (void *)(pid + at + bpf_core_field_offset(struct upid___mt, ns))) ||
		    !v ||
		    bpf_probe_read_kernel(&v, 4,
					  (void *)(v + bpf_core_field_offset(struct pid_namespace___mt, ns.inum))))
			break;
		if ((__u32)v != pidns_ino)
			continue;
		/* Both numbers read straight into their halves of v
		 * (little-endian), nothing kept across the reads. */
		at += bpf_core_field_offset(struct upid___mt, nr);
		v = 0;
		if (group)
			bpf_probe_read_kernel((__u32 *)&v + 1, 4, (void *)(group + at));
		bpf_probe_read_kernel(&v, 4, (void *)(pid + at));
		goto out;
	}
none:
	v = 0;
out:
	return v;
}

/* mt_pid_tgid is bpf_get_current_pid_tgid in memtrace's namespace. */
static __always_inline __u64 mt_pid_tgid(void)
{
	return pidns_ino ? mt_ns_ids(0, 0) : bpf_get_current_pid_tgid();
}

/* mt_task_pid and mt_task_tgid: another task's ids in memtrace's
 * namespace. */
static __always_inline __u32 mt_task_pid(struct task_struct *task)
{
	if (!pidns_ino)
		return BPF_CORE_READ(task, pid);
	return (__u32)mt_ns_ids((__u64)BPF_CORE_READ((struct task_struct___mt *)task, thread_pid), 0);
}

static __always_inline __u32 mt_task_tgid(struct task_struct *task)
{
	if (!pidns_ino)
		return BPF_CORE_READ(task, tgid);
	/* The group's struct pid, numbered as a thread's. */
	return (__u32)mt_ns_ids((__u64)BPF_CORE_READ((struct task_struct___mt *)task, signal, pids[1]), 0);
}
