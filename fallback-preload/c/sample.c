// sample.c: --sample under LD_PRELOAD (docs/sampling.md): the same
// per-thread countdown as the BPF side (bpf/mt_sample.h's draw, compiled
// here), so that only one allocation per sample_rate bytes, on average,
// walks its stack and is sent, and a table of the sampled blocks still
// live, so that only their frees are. The table is the process's own
// memory: a forked child has its parent's samples, as its heap is its
// parent's.
#include "mt.h"

typedef uint32_t __u32;
typedef uint64_t __u64;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define MT_SAMPLE_HOST
#include "../../bpf/mt_sample.h"

uint64_t sample_rate;
uint64_t sample_untracked;

static __thread uint64_t t_left TLS_IE;
static __thread int t_drawn TLS_IE;
static __thread uint64_t t_rng TLS_IE;

// Open addressing over a power-of-two array of addresses (0: empty),
// mapped at the first sample and touched only where samples land;
// deletion shifts the following entries back, so no tombstones.
#define TABLE_SLOTS (1u << 21)
#define TABLE_MAX (TABLE_SLOTS / 4 * 3)
static uint64_t *table;
static uint32_t table_n;
static spin_t table_lock;

static uint32_t rng32(void)
{
	if (UNLIKELY(!t_rng)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t_rng = ((uint64_t)syscall(SYS_gettid) << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20) | 1;
	}
	t_rng ^= t_rng << 13;
	t_rng ^= t_rng >> 7;
	t_rng ^= t_rng << 17;
	return (uint32_t)(t_rng >> 32);
}

int sample_take(uint64_t size)
{
	if (UNLIKELY(!t_drawn)) {
		t_left = mt_sample_draw(rng32(), sample_rate);
		t_drawn = 1;
	}
	if (size < t_left) {
		t_left -= size;
		return 0;
	}
	t_left = mt_sample_draw(rng32(), sample_rate);
	return 1;
}

// The counting filter of bpf/mt_sample.h, for the same reason and one
// more: a free whose address has no sample counted is let go without the
// table's lock, which every thread's frees would otherwise take.
#define FILTER (1u << 14)
static uint32_t filter[FILTER];

static uint32_t *filter_of(uint64_t p)
{
	return &filter[(uint32_t)((p * 0x9E3779B97F4A7C15ULL) >> 50) & (FILTER - 1)];
}

static uint32_t slot_of(uint64_t p)
{
	return (uint32_t)((p * 0x9E3779B97F4A7C15ULL) >> 43) & (TABLE_SLOTS - 1);
}

int sample_keep(const void *ptr)
{
	uint64_t p = (uint64_t)(uintptr_t)ptr;
	spin_lock(&table_lock);
	if (UNLIKELY(!table)) {
		void *m = mmap(NULL, (size_t)TABLE_SLOTS * 8, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED)
			__atomic_store_n(&table, (uint64_t *)m, __ATOMIC_RELEASE);
	}
	if (!table || table_n >= TABLE_MAX) {
		spin_unlock(&table_lock);
		__atomic_add_fetch(&sample_untracked, 1, __ATOMIC_RELAXED);
		return 0;
	}
	uint32_t i = slot_of(p);
	while (table[i] && table[i] != p)
		i = (i + 1) & (TABLE_SLOTS - 1);
	if (!table[i]) {
		table_n++;
		__atomic_add_fetch(filter_of(p), 1, __ATOMIC_RELEASE);
	}
	table[i] = p;
	spin_unlock(&table_lock);
	return 1;
}

int sample_forget(const void *ptr)
{
	uint64_t p = (uint64_t)(uintptr_t)ptr;
	if (!p || !__atomic_load_n(filter_of(p), __ATOMIC_ACQUIRE) || !__atomic_load_n(&table, __ATOMIC_ACQUIRE))
		return 0;
	spin_lock(&table_lock);
	uint32_t i = slot_of(p);
	while (table[i] && table[i] != p)
		i = (i + 1) & (TABLE_SLOTS - 1);
	if (!table[i]) {
		spin_unlock(&table_lock);
		return 0;
	}
	// Backward shift: move up each following entry whose home slot does
	// not lie (cyclically) after the hole.
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & (TABLE_SLOTS - 1); table[j]; j = (j + 1) & (TABLE_SLOTS - 1)) {
		uint32_t home = slot_of(table[j]);
		if (((j - home) & (TABLE_SLOTS - 1)) >= ((j - hole) & (TABLE_SLOTS - 1))) {
			table[hole] = table[j];
			hole = j;
		}
	}
	table[hole] = 0;
	table_n--;
	__atomic_sub_fetch(filter_of(p), 1, __ATOMIC_RELEASE);
	spin_unlock(&table_lock);
	return 1;
}

// The lock is held across fork, so that the child's copy of the table is
// whole; the child reseeds, or it would draw what its parent draws.
void sample_atfork_prepare(void)
{
	if (sample_rate)
		spin_lock(&table_lock);
}

void sample_atfork_parent(void)
{
	if (sample_rate)
		spin_unlock(&table_lock);
}

void sample_atfork_child(void)
{
	if (sample_rate)
		spin_unlock(&table_lock);
	t_rng = 0;
}
