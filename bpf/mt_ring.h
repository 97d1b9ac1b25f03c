/* SPDX-License-Identifier: GPL-2.0 */
/* Ring-buffer records: thread records, events in their packed and full
 * forms, and the reader's wake-ups.
 * Part of memtrace.bpf.c, which includes it once, in order. */

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
	__u64 id = mt_pid_tgid();
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
	return st ? (__u32)st->owner : (__u32)mt_pid_tgid();
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

static __always_inline void send(struct tstate *st, __u8 kind, __u8 op, __u8 flags, __u64 ptr, __u64 size, __u64 stack,
				 __u64 old_ptr, __u64 old_size, __u64 at)
{
	struct mt_event *e;
	if ((stack | old_ptr | old_size) == 0 && MT_PK_FITS(ptr, size, flags))
		send_packed(st, kind, op, flags, ptr, size, at);
	else if ((e = reserve_full(st, kind, op, flags, ptr, size, stack, old_ptr, old_size, at)))
		submit(e, st);
}
