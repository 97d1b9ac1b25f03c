/* SPDX-License-Identifier: GPL-2.0 */
/* Stack capture at the outermost call: the walk, the stack's id, sent once.
 * Part of memtrace.bpf.c, which includes it once, in order. */

/* The id of the n frames of buf (stack_scratch's, with buf->n = n) from
 * seed. In the compat build a global function of scalars, verified once:
 * a loop that reads the frame count from memory at each step made the
 * verifier follow every count along every later path (a million
 * instructions in the fd programs). */
#ifdef MT_COMPAT
__noinline __u64 mt_hash_stack(__u64 seed)
{
	__u32 zero = 0;
	struct stackbuf *buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!buf)
		return seed;
	__u32 n = buf->n;
	__u64 id = seed;
	for (__u32 j = 0; j < MT_MAX_FRAMES + 1; j++) {
		if (j >= n)
			break;
		id = (id ^ buf->ips[j]) * 0x100000001b3ULL;
	}
	return id;
}
#define mt_stack_id(buf, n, seed) mt_hash_stack(seed)
#else
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

static __always_inline __u64 mt_stack_id(struct stackbuf *buf, __u32 n, __u64 seed)
{
	struct mt_hash_ctx h = {.buf = buf, .id = seed};
	bpf_loop((n + 7) / 8, hash_cb, &h, 0);
	return h.id;
}
#endif

/* Stack ids this CPU found in stacks_sent or put there, direct-mapped:
 * most stacks recur, and a hit skips the shared LRU map's lookup (a hash,
 * a bucket walk and the entry's use mark) at every captured stack. A hit
 * says the id was sent once, as the map's entry did: the agent keeps
 * every stack it was sent, so that an id the LRU has evicted since and
 * this CPU does not send again is one the map would not have sent again
 * while it held it (docs/unwind.md). */
#define MT_SENT_CACHE 1024
struct mt_sent_cache {
	__u64 id[MT_SENT_CACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_sent_cache);
} sent_cache SEC(".maps");

/* Sends the stack of id unless it was sent: the cache, then the map. */
static __always_inline void mt_send_once(__u64 id, struct stackbuf *buf, __u32 n, __u16 reason)
{
	__u32 zero = 0;
	struct mt_sent_cache *sc = bpf_map_lookup_elem(&sent_cache, &zero);
	__u64 *seen = sc ? &sc->id[(id * 0x9e3779b97f4a7c15ULL) >> 54 & (MT_SENT_CACHE - 1)] : 0;
	if (seen && *seen == id)
		return;
	if (!bpf_map_lookup_elem(&stacks_sent, &id)) {
		__u8 one = 1;
		bpf_map_update_elem(&stacks_sent, &id, &one, BPF_ANY);
		send_stack(id, buf, n, reason);
	}
	if (seen)
		*seen = id;
}

/* The user stack at an outermost call, frame 0 being the caller: the
 * DWARF walk, or (unwind_dwarf 0) the return address at the probe plus
 * the kernel's frame-pointer walk from the caller's frame pointer.
 * Returns the stack's id, or 0. A global function, so that the verifier
 * checks it once per program instead of at every call site with every
 * caller's state (inlined, it was 400-600 thousand instructions a program
 * and most of a second of start-up each). */
#if defined(__TARGET_ARCH_arm64)
/* The kernel's name for a kprobe's context; the arm64 vmlinux.h lacks it. */
typedef struct user_pt_regs bpf_user_pt_regs_t;
#endif

/* The context is passed as bpf_user_pt_regs_t: a global function's context
 * argument must have the type the kernel gives the program's context,
 * which on arm64 is struct user_pt_regs, not struct pt_regs (6.12 refused
 * mt_enter_multi with "Caller passes invalid args into func#3"). */
__noinline __u64 mt_capture_stack(bpf_user_pt_regs_t *uctx)
{
	struct pt_regs *ctx = (struct pt_regs *)uctx;
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
			long got =
				bpf_get_stack(ctx, &buf->ips[1], (stack_depth - 1) * 8 & 0x3ff, BPF_F_USER_STACK | 1);
			if (got > 0)
				n += got / 8;
		}
#endif
	}
	if (n > MT_MAX_FRAMES)
		n = MT_MAX_FRAMES;
	buf->n = n;
	__u64 id = mt_stack_id(buf, n, 0xcbf29ce484222325ULL ^ (bpf_get_current_pid_tgid() >> 32)) | 1; /* never 0 */
	mt_send_once(id, buf, n, reason);
	return id;
}

static __always_inline __u64 capture_stack(struct pt_regs *ctx, struct tstate *st)
{
	if (stack_depth == 0 || !stack_wanted(st))
		return 0;
	return mt_capture_stack((bpf_user_pt_regs_t *)ctx);
}
