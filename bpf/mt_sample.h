/* SPDX-License-Identifier: GPL-2.0 */
/* --sample BYTES: a heap profile cheap enough to leave on (docs/sampling.md).
 * Each thread counts down the bytes it allocates from a draw of an
 * exponential distribution of mean sample_rate, as tcmalloc, Go's
 * runtime (mprof.go, malloc.go's nextSample) and heapprofd do: the
 * allocation that reaches zero is sampled (its stack walked, its event
 * sent) and the count starts again from a fresh draw. Every byte is then a
 * sample point with probability 1/rate, independently (the exponential
 * forgets how far it has run), so a block of s bytes is sampled with
 * probability 1 - e^(-s/rate): the agent weighs it by the inverse
 * (live/, internal/heapprof). Frees are sent only for the blocks sampled
 * and still live, which the sampled map holds.
 * Part of memtrace.bpf.c, which includes it once, in order; with
 * MT_SAMPLE_HOST defined, only its arithmetic (the LD_PRELOAD library's
 * countdown, fallback-preload/c/sample.c, and tracer/testdata). */

/* log2(1 + i/32) in 16.16 fixed point, i = 0..32; between two entries the
 * curve is taken as straight (Go's runtime/fastlog2.go does the same with
 * its own table), which is off by under 1e-4. */
static const __u32 mt_log2_tbl[33] = {
	0,     2909,  5732,  8473,  11136, 13727, 16248, 18704, 21098, 23433, 25711,
	27936, 30109, 32234, 34312, 36346, 38336, 40286, 42196, 44068, 45904, 47705,
	49472, 51207, 52911, 54584, 56229, 57845, 59434, 60997, 62534, 64047, 65536,
};

/* Bytes until the next sample for a uniform r: rate * -ln(u) with
 * u = (r + 1) / 2^32 in (0, 1]. -ln(u) = ln 2 * (32 - log2(r + 1)): the
 * integer part of the log by a binary search for the top bit, the fraction
 * from the table above; ln 2 is 45426 / 65536. The BPF side has no
 * floating point, and this error is far below the sampling noise. Pure
 * arithmetic, so that the test (tracer/sample_test.go) compiles this same
 * function for the host and checks the draws' mean. */
static __always_inline __u64 mt_sample_draw(__u32 r, __u64 rate)
{
	__u64 x = (__u64)r + 1;
	__u32 k = 0;
	__u64 y = x;
	if (y >> 32) {
		y >>= 32;
		k += 32;
	}
	if (y >> 16) {
		y >>= 16;
		k += 16;
	}
	if (y >> 8) {
		y >>= 8;
		k += 8;
	}
	if (y >> 4) {
		y >>= 4;
		k += 4;
	}
	if (y >> 2) {
		y >>= 2;
		k += 2;
	}
	if (y >> 1)
		k += 1;
	/* x's bits below its top one, as a 32-bit fraction. */
	__u64 f = k >= 32 ? 0 : (x << (32 - k)) & 0xffffffffULL;
	__u32 idx = (f >> 27) & 31;
	__u64 rem = (f >> 11) & 0xffff;
	__u64 lo = mt_log2_tbl[idx], hi = mt_log2_tbl[idx + 1];
	__u64 lg = ((__u64)k << 16) + lo + (((hi - lo) * rem) >> 16);
	__u64 neg = (32ULL << 16) - lg;
	return ((rate * neg) >> 16) * 45426 >> 16;
}

#ifndef MT_SAMPLE_HOST
/* Mean bytes between samples; 0: every allocation is logged. */
const volatile __u64 sample_rate = 0;
/* Sampled blocks the sampled map had no room for: not sent (their frees
 * could not be matched), counted here for the agent's figures. */
__u64 sample_untracked = 0;

struct mt_sample_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};

/* The live sampled blocks, by process and address. Sized by the agent
 * (one entry without --sample); a hash, not an LRU: a block evicted would
 * stay live in the agent's model forever. Not preallocated: its memory is
 * that of the samples live, not of its bound. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct mt_sample_key);
	__type(value, __u8);
} sampled SEC(".maps");

/* A counting filter over the sampled map: per slot (a hash of the
 * address), how many live samples may lie there. Nearly every free is of
 * a block not sampled, and this test reads one counter of 64 KiB that stay
 * in the cache, where the map's lookup missed it on a large heap (its
 * buckets are spread over megabytes): it costs the free path a few
 * instructions. A counter is raised before its entry is added and lowered
 * after its entry is deleted, so it is never below the entries it covers:
 * no sample's free is missed. */
#define MT_SAMPLE_FILTER (1 << 14)
__u32 sample_filter[MT_SAMPLE_FILTER] = {};

static __always_inline __u32 *mt_sample_slot(__u64 ptr)
{
	return &sample_filter[((ptr * 0x9E3779B97F4A7C15ULL) >> 50) & (MT_SAMPLE_FILTER - 1)];
}

/* --max-proc-samples: a process keeps at most sample_proc_max live
 * samples (0: no bound but the map's), so that one process cannot fill
 * the table the others share. sample_counts holds each process's count,
 * raised when its entry is added and lowered when it is deleted (the
 * agent deletes both at the process's exit); threads adding at once may
 * pass the bound by one each. */
const volatile __u32 sample_proc_max = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} sample_counts SEC(".maps");

/* 0: the block at ptr is certainly not a live sample. */
static __always_inline int mt_sample_maybe(__u64 ptr)
{
	return *mt_sample_slot(ptr) != 0;
}

/* Whether an allocation of size bytes is the thread's next sample. */
static __always_inline int mt_sample_take(struct tstate *st, __u64 size)
{
	if (!st->sample_init) {
		st->sample_left = mt_sample_draw(bpf_get_prandom_u32(), sample_rate);
		st->sample_init = 1;
	}
	if (size < st->sample_left) {
		st->sample_left -= size;
		return 0;
	}
	st->sample_left = mt_sample_draw(bpf_get_prandom_u32(), sample_rate);
	return 1;
}

/* The process's count of live samples (sample_counts), made on its
 * first sample; 0 when there is no room for it. */
static __always_inline __u32 *mt_sample_count(__u32 tgid)
{
	__u32 *n = bpf_map_lookup_elem(&sample_counts, &tgid);
	if (n)
		return n;
	__u32 zero = 0;
	bpf_map_update_elem(&sample_counts, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&sample_counts, &tgid);
}

/* Records a sampled block live; 0 when the map is full or the process
 * holds its bound (counted). A global function: inlined, its locals
 * took the session program's stack past the verifier's bound for the
 * stack walk's calls. */
__noinline int mt_sample_keep(__u64 ptr)
{
	struct mt_sample_key k = {.tgid = mt_pid_tgid() >> 32, .ptr = ptr};
	__u32 *n = 0;
	if (sample_proc_max) {
		n = mt_sample_count(k.tgid);
		if (!n || *n >= sample_proc_max) {
			__sync_fetch_and_add(&sample_untracked, 1);
			return 0;
		}
	}
	__u8 one = 1;
	__u32 *slot = mt_sample_slot(ptr);
	__sync_fetch_and_add(slot, 1);
	long err = bpf_map_update_elem(&sampled, &k, &one, BPF_NOEXIST);
	if (err == -17 /* EEXIST: a block whose free was missed, kept once */) {
		__sync_fetch_and_add(slot, -1);
		return 1;
	}
	if (err) {
		__sync_fetch_and_add(slot, -1);
		__sync_fetch_and_add(&sample_untracked, 1);
		return 0;
	}
	if (n)
		__sync_fetch_and_add(n, 1);
	return 1;
}

/* Forgets the block at ptr: 1 when it was a live sampled one, whose free
 * is then sent. */
static __always_inline int mt_sample_forget(__u64 ptr)
{
	if (!mt_sample_maybe(ptr))
		return 0;
	struct mt_sample_key k = {.tgid = mt_pid_tgid() >> 32, .ptr = ptr};
	if (bpf_map_delete_elem(&sampled, &k))
		return 0;
	__sync_fetch_and_add(mt_sample_slot(ptr), -1);
	if (sample_proc_max) {
		__u32 *n = bpf_map_lookup_elem(&sample_counts, &k.tgid);
		if (n && *n > 0)
			__sync_fetch_and_add(n, -1);
	}
	return 1;
}
#endif
