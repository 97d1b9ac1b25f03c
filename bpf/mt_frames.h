/* SPDX-License-Identifier: GPL-2.0 */
/* Stacks: which threads walk theirs (--stack-threads), and the records of a
 * walked stack and of the files its frames lie in.
 * Part of memtrace.bpf.c, which includes it once, in order. */

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
	mt_loop(n_stack_threads * 16, 8 * 16, match_cb, &m);
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

#if defined(__TARGET_ARCH_x86) && !defined(MT_COMPAT)
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
	mt_loop(MT_PATH_PARTS * 2, MT_PATH_PARTS * 2, path_cb, &c);
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
#ifndef MT_COMPAT
	bpf_find_vma(c->task, o.f.addr, frame_vma_cb, &o, 0);
	if (o.file)
		send_file(o.file, o.f.ino);
#endif
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
	r->tgid = mt_pid_tgid() >> 32;
	r->nframes = n;
	r->reason = reason;
	struct mt_send_ctx c = {.r = r, .buf = buf, .task = mt_current_task()};
	mt_loop(n, MT_MAX_FRAMES + 1, frame_cb, &c);
	submit(r, 0);
}
