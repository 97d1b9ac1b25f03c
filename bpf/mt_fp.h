/* SPDX-License-Identifier: GPL-2.0 */
/* The frame-pointer stack walk (--stack-unwind fp).
 * Part of memtrace.bpf.c, which includes it once, in order. */

#if defined(__TARGET_ARCH_x86)
/* The frame-pointer walk (--stack-unwind fp) as the kernel's
 * (perf_callchain_user: follow [fp] and [fp+8] until a read fails, the
 * depth is reached or fp leaves user space), but served from chunks of
 * the stack like the DWARF walk, where bpf_get_stack reads each frame
 * with two faulting user accesses. */
/* The frame count is buf->n, in the map: a count on the BPF stack was
 * tracked exactly through each of the callback's rounds, and every count
 * went on along its own path (--stack-unwind fp --stack-depth 127 was
 * refused at a million instructions). */
struct mt_fpwalk {
	struct stackbuf *buf;
	struct mt_chunk *chunk;
	struct mt_wstate *s;
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
MT_GLOBAL int mt_fp_step(struct mt_wstate *w, struct mt_chunk *c, __u64 *ra)
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
	__u32 n = w->buf->n;
	if (n >= stack_depth || n > MT_MAX_FRAMES)
		return 1;
	__u64 ra = 0;
	if (!mt_fp_step(w->s, w->chunk, &ra))
		return 1;
	w->buf->ips[n & MT_MAX_FRAMES] = ra;
	w->buf->n = n + 1;
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
	buf->n = 1;
	if (stack_depth > 1)
		mt_loop(stack_depth, MT_MAX_FRAMES + 1, fp_cb, &w);
	return buf->n;
}
#endif
