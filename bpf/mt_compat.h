/* SPDX-License-Identifier: GPL-2.0 */
/* The two builds of every object: the default one for kernels with
 * bpf_loop, bpf_find_vma and the attach cookie (Linux 5.17+), and the
 * compat one (-DMT_COMPAT) for the kernels before them, back to 5.8's ring
 * buffer. What each construct becomes in the compat build, and what that
 * costs, is docs/kernels.md's "Before 5.17". Included first by
 * mt_state.h, so that every part sees the same choices. */

#ifdef MT_COMPAT
/* A function verified once on its own must take scalars (and the
 * context) only before 5.12; those taking pointers are static there,
 * verified at their call sites with the caller's types. */
#define MT_GLOBAL static __noinline

/* bpf_loop: a bounded loop the verifier walks iteration by iteration,
 * so each call site gives the most iterations its callback can need. The
 * callbacks are the same functions, called directly. */
#define mt_loop(n, cap, cb, ctx)                                                                                       \
	do {                                                                                                           \
		__u32 __mt_n = (n);                                                                                    \
		for (__u32 __mt_i = 0; __mt_i < (cap); __mt_i++) {                                                   \
			if (__mt_i >= __mt_n || cb(__mt_i, ctx))                                                       \
				break;                                                                                 \
		}                                                                                                      \
	} while (0)

/* bpf_get_current_task_btf (5.11): the same task through the older
 * helper; every read of it goes through BPF_CORE_READ already. */
#define mt_current_task() ((struct task_struct *)bpf_get_current_task())

/* The attach cookie (5.15): each probe's link runs a stub the agent
 * builds (tracer/compat.go) that stores its cookie here and tail-calls
 * the program, which reads it back. The stub and the program run on one
 * CPU with preemption off, one after the other. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} compat_cookie SEC(".maps");

/* The stubs' tail-call targets, at the indexes tracer/compat.go gives. */
struct {
	__uint(type, 3); /* BPF_MAP_TYPE_PROG_ARRAY, which the arm64 vmlinux.h lacks */
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} compat_progs SEC(".maps");

static __always_inline __u64 mt_cookie(void *ctx)
{
	__u32 zero = 0;
	__u64 *c = bpf_map_lookup_elem(&compat_cookie, &zero);
	return c ? *c : 0;
}

/* An atomic read with a full barrier: fetching atomics came in 5.12, and
 * an add without a result (the old XADD, a locked add) is the barrier. */
#define mt_load_fenced(v)                                                                                              \
	({                                                                                                             \
		typeof(v) __mt_zero = 0;                                                                               \
		/* clang makes an add of a known 0 an atomic OR (5.12) */                                              \
		asm volatile("" : "+r"(__mt_zero));                                                                    \
		__sync_fetch_and_add(&(v), __mt_zero);                                                                 \
		*(volatile typeof(v) *)&(v);                                                                           \
	})
#define mt_set_flag(v) __sync_fetch_and_add(&(v), 1)
#else
#define MT_GLOBAL __noinline
#define mt_loop(n, cap, cb, ctx) bpf_loop(n, cb, ctx, 0)
#define mt_current_task() bpf_get_current_task_btf()
#define mt_cookie(ctx) bpf_get_attach_cookie(ctx)
#define mt_load_fenced(v) __sync_fetch_and_add(&(v), 0)
#define mt_set_flag(v) __sync_fetch_and_or(&(v), 1)
#endif
