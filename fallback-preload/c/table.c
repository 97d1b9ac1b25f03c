// table.c: the ptr -> size table: sharded, open addressing with linear
// probing and backward-shift deletion. Only the text mode uses it; the
// binary mode's converter keeps the sizes in memtrace.
#include "table.h"

#define NSHARD 64

typedef struct {
	uintptr_t key;
	uint64_t val;
} slot_t;
typedef struct {
	spin_t lock;
	uint32_t cap, n;
	slot_t *slots;
} __attribute__((aligned(64))) shard_t;

static shard_t shards[NSHARD];

static inline uint64_t hash_ptr(uintptr_t p)
{
	return (uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ull;
}

static void shard_grow(shard_t *s)
{
	uint32_t ncap = s->cap ? s->cap * 2 : 1024;
	slot_t *ns = raw_map((size_t)ncap * sizeof(slot_t));
	if (!ns)
		return;
	for (uint32_t i = 0; i < s->cap; i++) {
		if (!s->slots[i].key)
			continue;
		uint32_t j = (uint32_t)(hash_ptr(s->slots[i].key) >> 20) & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = s->slots[i];
	}
	if (s->slots)
		raw_unmap(s->slots, (size_t)s->cap * sizeof(slot_t));
	s->slots = ns;
	s->cap = ncap;
}

void tbl_put(const void *p, uint64_t val)
{
	uintptr_t k = (uintptr_t)p;
	uint64_t h = hash_ptr(k);
	shard_t *s = &shards[h >> 58];
	spin_lock(&s->lock);
	if ((s->n + 1) * 4 >= s->cap * 3)
		shard_grow(s);
	if (s->cap && (s->n + 1) < s->cap) {
		uint32_t m = s->cap - 1, j = (uint32_t)(h >> 20) & m;
		while (s->slots[j].key && s->slots[j].key != k)
			j = (j + 1) & m;
		if (!s->slots[j].key) {
			s->slots[j].key = k;
			s->n++;
		}
		s->slots[j].val = val;
	}
	spin_unlock(&s->lock);
}

int tbl_take(const void *p, uint64_t *val)
{
	uintptr_t k = (uintptr_t)p;
	uint64_t h = hash_ptr(k);
	shard_t *s = &shards[h >> 58];
	int found = 0;
	spin_lock(&s->lock);
	if (s->cap) {
		uint32_t m = s->cap - 1, j = (uint32_t)(h >> 20) & m;
		while (s->slots[j].key && s->slots[j].key != k)
			j = (j + 1) & m;
		if (s->slots[j].key == k) {
			*val = s->slots[j].val;
			found = 1;
			s->n--;
			// Backward shift: move later members of the cluster into
			// the hole when their home is not between hole and them.
			uint32_t hole = j, i = j;
			for (;;) {
				i = (i + 1) & m;
				if (!s->slots[i].key)
					break;
				uint32_t home = (uint32_t)(hash_ptr(s->slots[i].key) >> 20) & m;
				if (((i - home) & m) >= ((i - hole) & m)) {
					s->slots[hole] = s->slots[i];
					hole = i;
				}
			}
			s->slots[hole].key = 0;
		}
	}
	spin_unlock(&s->lock);
	return found;
}

void tbl_lock_all(void)
{
	for (int i = 0; i < NSHARD; i++)
		spin_lock(&shards[i].lock);
}

void tbl_unlock_all(void)
{
	for (int i = 0; i < NSHARD; i++)
		spin_unlock(&shards[i].lock);
}
