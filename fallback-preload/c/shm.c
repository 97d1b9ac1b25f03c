// shm.c: the binary mode (memtrace --preload): compact 32-byte records
// appended to per-thread chunks of a shared-memory region that the
// memtrace process (package preload, shm.go) created, maps too, and turns
// into the text log. No syscall, no lock and no size table per event: the
// consumer keeps the ptr->size map, filters by size and thread name, and
// formats with logfmt. The layout is mt_abi.h's.
//
// Lock-free on purpose: a traced process may fork or be SIGKILLed at any
// instant, and no lock of the region may ever be held by a dead process.
#include "shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "modules.h"
#include "stack.h"

typedef struct {
	mt_chunk_hdr *ch;
	mt_rec *recs;
	uint32_t n, cap;
	uint32_t fast;      // records below this index take the fast path
	uint32_t stream, seq;
	uint32_t lost;      // dropped, not yet added to the header
	uint32_t by_rows, by_bt; // stacks walked each way, not yet added
	struct stk_table *stk; // the stacks this thread sent (see stk_find)
	int stk_done;          // the thread is ending: no table any more
	uint64_t fr_rows, fr_reused; // their frames over the rows, those reused, not yet added
	unsigned gen;
	int stacks, keyed;
	uint32_t stk_epoch; // stk tables this thread started, never reset (walk memos name one)
	pid_t tid;
	uint64_t retry_at;  // while dropping: next time a chunk is tried
	int busy;           // a record's time is read, the record not committed (MT_COMMIT_BUSY)
	char name[MT_NAME_LEN];
} bstate;

static mt_shm_hdr *shm;
static mt_file *shm_files;
static uint32_t shm_n_files;
static uint32_t *shm_state;
static char *shm_data, *shm_small;
static size_t shm_len;
static int shm_clock_kind;
// consumer_lost: a wait saw no heartbeat for 1 s, so memtrace is dead or
// stopped; claims do not wait while the heartbeat stays at lost_beat. A
// memtrace that was only stopped (Ctrl-Z, a debugger) or starved beats
// again when it resumes, and the waits come back with it.
static volatile int consumer_lost;
static uint32_t lost_beat;

// consumer_away says whether memtrace is still taken for lost, ending
// that once its heartbeat has moved. For the claims and the stack files'
// waits alike, so that neither gives up for good on a stop.
static int consumer_away(void)
{
	if (!__atomic_load_n(&consumer_lost, __ATOMIC_ACQUIRE))
		return 0;
	if (__atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE) == __atomic_load_n(&lost_beat, __ATOMIC_RELAXED))
		return 1;
	__atomic_store_n(&consumer_lost, 0, __ATOMIC_RELAXED);
	return 0;
}
static __thread bstate tb TLS_IE;
// Per thread: two threads may fork at once; each child is a copy of its
// forking thread and takes that thread's values.
static __thread uint64_t fork_ts TLS_IE;
static __thread uint32_t fork_serial TLS_IE; // the child's stream, taken before fork_ts
static pid_t fork_parent;
// g_unfollowed: not memtrace's child without --follow (bin_attach); the
// process reports itself and stays off.
static int g_unfollowed;

static inline uint64_t bin_now(void)
{
	if (LIKELY(shm_clock_kind == MT_CLOCK_COUNTER))
		return read_counter();
	return mono_ns();
}

static uint64_t bin_now_ns(void)
{
	// The region's clock in ns since the epoch, for the library's own use.
	uint64_t r = bin_now();
	if (shm_clock_kind == MT_CLOCK_COUNTER) {
		uint64_t d = r - shm->cnt0;
		uint64_t hi = (d >> 32) * shm->mult, lo = ((d & 0xffffffffu) * shm->mult) >> 32;
		return shm->mono0 + hi + lo - shm->epoch;
	}
	return r - shm->epoch;
}

static void bin_publish_lost(void)
{
	if (tb.lost) {
		__atomic_add_fetch(&shm->lost, tb.lost, __ATOMIC_RELAXED);
		tb.lost = 0;
	}
	if (tb.by_rows || tb.by_bt) {
		__atomic_add_fetch(&shm->stacks_rows, tb.by_rows, __ATOMIC_RELAXED);
		__atomic_add_fetch(&shm->stacks_bt, tb.by_bt, __ATOMIC_RELAXED);
		tb.by_rows = tb.by_bt = 0;
	}
	if (tb.fr_rows) {
		__atomic_add_fetch(&shm->frames_rows, tb.fr_rows, __ATOMIC_RELAXED);
		__atomic_add_fetch(&shm->frames_reused, tb.fr_reused, __ATOMIC_RELAXED);
		tb.fr_rows = tb.fr_reused = 0;
	}
}

static void bin_seal(void)
{
	if (tb.ch) {
		__atomic_store_n(&tb.ch->sealed, 1, __ATOMIC_RELEASE);
		tb.ch = NULL;
		tb.recs = NULL;
		tb.n = tb.cap = tb.fast = 0;
	}
}

// bin_stopped says whether memtrace has stopped reading the region (it
// detached on Ctrl-C, or finished). The process then stops tracing for
// good and its hooks only pass calls through: g_off makes every slow path
// return at once, and the new name generation sends every thread's next
// event to the slow path. Checked out of line only (a new chunk, a rename,
// a thread's start), so a thread writes at most the rest of its chunk,
// which nobody reads, before it notices.
static int bin_stopped(void)
{
	if (!__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE))
		return 0;
	if (!g_off) {
		g_off = 1;
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	}
	return 1;
}

// chunk_at is chunk idx's header: a large chunk, or past n_chunks a
// small one.
static mt_chunk_hdr *chunk_at(uint32_t idx, uint32_t *size)
{
	uint32_t nl = shm->n_chunks;
	if (idx < nl) {
		*size = shm->chunk_size;
		return (mt_chunk_hdr *)(shm_data + (size_t)idx * shm->chunk_size);
	}
	*size = shm->small_size;
	return (mt_chunk_hdr *)(shm_small + (size_t)(idx - nl) * shm->small_size);
}

// bin_try_claim takes a chunk of one size: small or large.
static int bin_try_claim(int small, uint32_t *idx)
{
	uint32_t nch = small ? shm->n_small : shm->n_chunks;
	uint32_t first = small ? shm->n_chunks : 0;
	uint32_t *hwp = small ? &shm->hw_small : &shm->hw;
	uint32_t *freep = small ? &shm->n_free_small : &shm->n_free;
	if (__atomic_load_n(freep, __ATOMIC_ACQUIRE) > 0) {
		// Chunks the consumer has emptied: reuse them before touching
		// new pages. The scan is rare (once per chunk's worth of records).
		uint32_t hw = __atomic_load_n(hwp, __ATOMIC_ACQUIRE);
		if (hw > nch)
			hw = nch;
		uint32_t start = (uint32_t)tb.tid % (hw ? hw : 1);
		for (uint32_t k = 0; k < hw; k++) {
			uint32_t i = first + (start + k) % hw;
			uint32_t want = MT_CH_FREE;
			if (__atomic_load_n(&shm_state[i], __ATOMIC_RELAXED) == MT_CH_FREE &&
			    __atomic_compare_exchange_n(&shm_state[i], &want, MT_CH_OWNED, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED)) {
				__atomic_sub_fetch(freep, 1, __ATOMIC_RELAXED);
				*idx = i;
				return 1;
			}
		}
	}
	uint32_t hw = __atomic_load_n(hwp, __ATOMIC_RELAXED);
	while (hw < nch) {
		if (__atomic_compare_exchange_n(hwp, &hw, hw + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			uint32_t i = first + hw, size;
			__atomic_store_n(&shm_state[i], MT_CH_OWNED, __ATOMIC_RELEASE);
			// Fault the fresh chunk's pages in one call rather than
			// one fault per 128 records (EINVAL before Linux 5.14).
			void *at = chunk_at(i, &size);
			madvise(at, size, 23 /* MADV_POPULATE_WRITE */);
			*idx = i;
			return 1;
		}
	}
	return 0;
}

// bin_take: a thread's first chunk is a small one, its later ones large;
// either size when the other has none left.
static int bin_take(uint32_t *idx)
{
	int small = tb.seq == 0 && shm->n_small > 0;
	return bin_try_claim(small, idx) || ((small || shm->n_small > 0) && bin_try_claim(!small, idx));
}

// bin_claim gives the thread a fresh chunk. With the region full it waits
// for the consumer (so that a burst is slowed down, not lost) while the
// consumer shows signs of life:
//   - no heartbeat for 1 s: memtrace is gone (killed, or it finished while
//     this process lives on) or stopped: drop and count, and wait again
//     only once the heartbeat has moved (consumer_lost);
//   - 2 s without a free chunk although the consumer lives (the region is
//     held by live threads that write little): drop and count, and do not
//     wait again for 1 s.
static int bin_claim(uint64_t ts)
{
	static uint64_t nowait_until;
	uint32_t idx;
	int ok = bin_take(&idx);
	if (!ok && !consumer_away() && !__atomic_load_n(&shm->gone, __ATOMIC_ACQUIRE) &&
	    bin_now_ns() >= __atomic_load_n(&nowait_until, __ATOMIC_RELAXED)) {
		uint32_t beat = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
		int still = 0, waited = 0;
		while (!ok && still < 2000 && waited++ < 4000 && !__atomic_load_n(&shm->gone, __ATOMIC_ACQUIRE) &&
		       !__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE)) {
			struct timespec ts = {0, 500000};
			nanosleep(&ts, NULL);
			ok = bin_take(&idx);
			uint32_t b = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
			still = b == beat ? still + 1 : 0;
			beat = b;
		}
		if (!ok && still >= 2000) {
			__atomic_store_n(&lost_beat, beat, __ATOMIC_RELAXED);
			__atomic_store_n(&consumer_lost, 1, __ATOMIC_RELEASE);
		} else if (!ok)
			__atomic_store_n(&nowait_until, bin_now_ns() + 1000000000ull, __ATOMIC_RELAXED);
	}
	if (!ok)
		return 0;
	uint32_t size;
	mt_chunk_hdr *c = chunk_at(idx, &size);
	// A chunk taken in the middle of a record is busy with it from the
	// start, and no older than its time. One taken before a record is
	// busy until its name record is in, and no older than the time read
	// once it is out: a time read before memtrace can see the chunk could
	// be older than what it writes meanwhile.
	c->committed = MT_COMMIT_BUSY;
	c->t_min = ts;
	c->sealed = 0;
	c->pid = (uint32_t)g_pid;
	c->tid = (uint32_t)tb.tid;
	c->seq = tb.seq++;
	c->exiting = (uint32_t)tb.stk_done;
	// stream last: the consumer reads a chunk only once it is set.
	__atomic_store_n(&c->stream, tb.stream, __ATOMIC_RELEASE);
	if (!ts)
		__atomic_store_n(&c->t_min, bin_now(), __ATOMIC_RELAXED);
	tb.ch = c;
	tb.recs = (mt_rec *)(c + 1);
	tb.n = 0;
	tb.cap = (size - (uint32_t)sizeof(mt_chunk_hdr)) / (uint32_t)sizeof(mt_rec);
	return 1;
}

// bin_commit publishes n records; a record in progress stays marked.
static inline void bin_commit(uint32_t n)
{
	tb.n = n;
	__atomic_store_n(&tb.ch->committed, n | (tb.busy ? MT_COMMIT_BUSY : 0), __ATOMIC_RELEASE);
}

// bin_done publishes n records, the one in progress among them.
static inline void bin_done(uint32_t n)
{
	tb.busy = 0;
	bin_commit(n);
}

// bin_unbusy ends a record in progress that is not written (the call
// failed, or the record is dropped).
static void bin_unbusy(void)
{
	if (tb.busy) {
		tb.busy = 0;
		if (tb.ch)
			__atomic_store_n(&tb.ch->committed, tb.n, __ATOMIC_RELEASE);
	}
}

// bin_refresh_name writes a NAME record stamped ts: the time of the event
// it comes before, so that a stream's times never go back.
static void bin_refresh_name(uint64_t ts)
{
	char nm[17] = {0};
	tb.gen = __atomic_load_n(&name_gen, __ATOMIC_RELAXED);
	if (syscall(SYS_prctl, PR_GET_NAME, nm, 0, 0, 0) != 0)
		nm[0] = 0;
	nm[15] = 0;
	tb.stacks = stack_depth > 0 && name_matches(nm, stack_threads);
	tb.fast = (tb.ch && !tb.stacks && tb.cap > 2) ? tb.cap - 2 : 0;
	if (tb.ch && tb.n > 0 && memcmp(nm, tb.name, MT_NAME_LEN) == 0)
		return;
	memcpy(tb.name, nm, MT_NAME_LEN);
	if (tb.ch && tb.n < tb.cap) {
		mt_rec *r = &tb.recs[tb.n];
		r->ts = ts;
		memcpy(&r->ptr, nm, MT_NAME_LEN); // ptr and size hold the name
		r->meta = MT_R_NAME;
		bin_commit(tb.n + 1);
	}
}

// bin_new_stream gives the thread its stream serial. It runs before the
// thread's first timestamp is read, so that the consumer, which knows how
// many serials exist when it starts a pass, can tell which records may
// still come with older times (see converter.watermark).
static void bin_new_stream(void)
{
	tb.tid = gettid_raw();
	tb.stream = fork_serial ? fork_serial : __atomic_add_fetch(&shm->stream_next, 1, __ATOMIC_SEQ_CST);
	fork_serial = 0;
	tb.seq = 0;
	tb.gen = name_gen - 1;
	if (!tb.keyed) {
		// The key's destructor writes the thread's EXIT record.
		tb.keyed = 1;
		pthread_setspecific(exit_key, &tb);
	}
#if defined(__x86_64__)
	__asm__ __volatile__("lfence" ::: "memory"); // rdtsc after the serial
#endif
}

static int bin_room(uint32_t extra, uint64_t ts);

// bin_ts_slow gives the thread its stream and a chunk before its first
// record's time is read, so that the record is marked busy from then on
// (the chunk's t_min is older).
static uint32_t frame_slots(void);

// bin_ts_slow makes room for the record before its time is read (the
// thread's first chunk, a new one when this one is nearly full): a thread
// that waits for a chunk then holds no record in progress, which would
// hold back what memtrace writes of every other thread.
static __attribute__((noinline)) void bin_ts_slow(void)
{
	if (!g_ready || g_off)
		return;
	if (!tb.stream)
		bin_new_stream();
	if (!bin_stopped())
		bin_room(stack_depth ? frame_slots() : 0, 0);
}

// bin_ts reads a record's time, the record marked in progress first: the
// consumer, which sees the mark or else only records timed after it
// looked, never writes a later record of another thread before this one.
static inline uint64_t bin_ts(void)
{
	if (UNLIKELY(!tb.ch || tb.n >= tb.fast))
		bin_ts_slow();
	if (LIKELY(tb.ch != NULL)) {
		tb.busy = 1;
		__atomic_store_n(&tb.ch->committed, tb.n | MT_COMMIT_BUSY, __ATOMIC_RELAXED);
	}
	return bin_now();
}

// bin_room makes room for a record of 1+extra slots: a new stream on the
// thread's first event, a new chunk when this one is full, the name when it
// changed. 0 means drop (the region is full and the consumer gone).
static int bin_room(uint32_t extra, uint64_t ts)
{
	if (UNLIKELY(!tb.stream))
		bin_new_stream();
	if (tb.ch && tb.n + 2 + extra <= tb.cap) {
		if (UNLIKELY(tb.gen != name_gen))
			bin_refresh_name(ts ? ts : bin_now());
		return 1;
	}
	if (!tb.ch && tb.retry_at && bin_now_ns() < tb.retry_at)
		return 0;
	// A record in progress leaves the sealed chunk marked busy: memtrace
	// takes the stream for busy until its next chunk is out (busy with
	// the record from the start), or the thread is gone. The sealed
	// chunk is memtrace's from here on.
	bin_seal();
	if (!bin_claim(ts)) {
		tb.retry_at = bin_now_ns() + 10000000; // try again in 10 ms
		return 0;
	}
	tb.retry_at = 0;
	bin_publish_lost();
	// A new chunk re-reads the name: a rename through /proc has no hook.
	// The name record commits the chunk out of its first busy state
	// (bin_claim), or keeps it busy with the record in progress.
	tb.gen = name_gen - 1;
	bin_refresh_name(ts ? ts : tb.ch->t_min);
	if (!tb.busy && tb.n == 0)
		__atomic_store_n(&tb.ch->committed, 0, __ATOMIC_RELEASE);
	return tb.n + 1 + extra <= tb.cap;
}

// The stacks a thread sent, so that a stack goes into the region once and
// its later events carry only its id (mt_abi.h): writing a stack's frames
// into memory the reader's CPU then pulls over costs the traced thread
// more than walking them, and the reader would have to key its own
// table by all those bytes again. The table is the thread's own (no
// lock: a signal handler's call passes through, t_in), and its ids
// belong to the thread's stream, the one order the reader keeps: a
// definition always comes before its references. It starts over (ids
// from 1) for a new stream (a fork child), a new module table (a frame's
// file and offset may differ for the same address), and when full; the
// reader keeps the latest frames of each id, so none of this needs to be
// said. Kept: the frames' addresses, count and stop, which with the
// module table's sequence decide everything the record says.
#define STK_SLOTS 4096
#define STK_WORDS (1u << 15) // frame addresses held, in all

typedef struct {
	uint64_t hash;
	uint32_t id, off; // id 0: a free slot; off: the first address in words
	uint32_t n, stop;
} stk_slot;

// A thread starts with STK_FIRST slots and doubles them (starting over)
// as its stacks fill half: a program of many threads with few stacks
// each touches a few pages a thread, not the whole table's.
#define STK_FIRST 256

typedef struct stk_table {
	uint32_t stream, next_id, used;
	uint32_t epoch; // tb.stk_epoch when it started over last
	unsigned gen;
	uint32_t mask; // slots in use, less one
	stk_slot slot[STK_SLOTS];
	uint64_t words[STK_WORDS];
} stk_table;

// stk_max_mask: the most slots a table takes, less one. A table of fewer
// ids (MEMTRACE_STACK_IDS, tests) takes fewer, so that a test can make
// it forget, evict and start over with few stacks.
static uint32_t stk_max_mask(void)
{
	uint32_t mask = STK_SLOTS - 1;
	while (mask > 1 && mask >= stack_ids)
		mask >>= 1;
	return mask;
}

static void stk_reset(stk_table *t, unsigned gen, uint32_t mask)
{
	memset(t->slot, 0, (size_t)(mask + 1) * sizeof t->slot[0]);
	t->epoch = ++tb.stk_epoch;
	t->stream = tb.stream;
	t->gen = gen;
	t->next_id = 1;
	t->used = 0;
	t->mask = mask;
}

// Tables of ended threads, for the next threads to take: a program that
// starts a thread per request would otherwise map and unmap a table for
// each, and every unmap in a process of several threads interrupts each
// CPU that runs one of them (the TLB shootdown), on top of the new
// table's page faults.
#define STK_SPARE 16
static stk_table *stk_spare[STK_SPARE];

static stk_table *stk_take(void)
{
	for (int i = 0; i < STK_SPARE; i++) {
		if (!__atomic_load_n(&stk_spare[i], __ATOMIC_RELAXED))
			continue;
		stk_table *t = __atomic_exchange_n(&stk_spare[i], NULL, __ATOMIC_ACQUIRE);
		if (t) {
			// Clear the slots the last thread used, as a fresh
			// table's pages are.
			memset(t->slot, 0, (size_t)(t->mask + 1) * sizeof t->slot[0]);
			return t;
		}
	}
	return raw_map(sizeof(stk_table));
}

static void stk_free(void)
{
	stk_table *t = tb.stk;
	if (!t)
		return;
	tb.stk = NULL;
	for (int i = 0; i < STK_SPARE; i++) {
		stk_table *want = NULL;
		if (!__atomic_load_n(&stk_spare[i], __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&stk_spare[i], &want, t, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	raw_unmap(t, sizeof *t);
}

// stk_find returns the id of the thread's stack of n frames from fr, and
// sets *known when the reader already has it; 0 when it is kept nowhere
// (no memory, or a torn module table: gen 0).
static uint32_t stk_find(const mt_rawframe *fr, int n, uint32_t stop, unsigned gen, int *known)
{
	*known = 0;
	if (!gen || n <= 0)
		return 0;
	stk_table *t = tb.stk;
	if (UNLIKELY(!t)) {
		if (tb.stk_done)
			return 0;
		t = tb.stk = stk_take();
		if (!t)
			return 0;
		// Zero slots (fresh pages, or cleared): only the slots a stack
		// takes are touched.
		t->used = 0;
		t->epoch = ++tb.stk_epoch;
		t->stream = tb.stream;
		t->gen = gen;
		t->next_id = 1;
		t->mask = STK_FIRST - 1 < stk_max_mask() ? STK_FIRST - 1 : stk_max_mask();
	}
	if (UNLIKELY(t->stream != tb.stream || t->gen != gen))
		stk_reset(t, gen, t->mask);
	uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull ^ stop;
	for (int i = 0; i < n; i++) {
		h = (h ^ fr[i].addr) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	uint32_t mask = t->mask;
	uint32_t i0 = (uint32_t)h & mask, i1 = (i0 + 1) & mask;
	for (uint32_t k = 0; k < 2; k++) {
		stk_slot *sl = &t->slot[k ? i1 : i0];
		if (sl->id && sl->hash == h && sl->n == (uint32_t)n && sl->stop == stop) {
			const uint64_t *w = &t->words[sl->off];
			int j = 0;
			while (j < n && w[j] == fr[j].addr)
				j++;
			if (j == n) {
				*known = 1;
				return sl->id;
			}
		}
	}
	if (t->next_id > stack_ids || t->used + (uint32_t)n > STK_WORDS) {
		stk_reset(t, gen, mask);
	} else if (t->next_id > (mask + 1) / 2 && mask < stk_max_mask()) {
		mask = mask * 2 + 1;
		stk_reset(t, gen, mask);
		i0 = (uint32_t)h & mask;
		i1 = (i0 + 1) & mask;
	}
	stk_slot *sl = &t->slot[i0];
	if (sl->id && !t->slot[i1].id)
		sl = &t->slot[i1];
	sl->hash = h;
	sl->id = t->next_id++;
	sl->off = t->used;
	sl->n = (uint32_t)n;
	sl->stop = stop;
	for (int j = 0; j < n; j++)
		t->words[t->used + (uint32_t)j] = fr[j].addr;
	t->used += (uint32_t)n;
	return sl->id;
}

#if defined(__x86_64__)
#include <cpuid.h>
// have_prfchw: the CPU has PREFETCHW (CPUID 0x80000001 ECX bit 8), which
// an older one may refuse (#UD): asked once, at the first stack.
static int have_prfchw = -1;
#endif

static inline void prefetch_write(const void *p)
{
#if defined(__x86_64__)
	// GCC's builtin emits PREFETCHW only with -mprfchw, for every CPU;
	// a read prefetch would leave the line shared, still to be taken.
	if (UNLIKELY(have_prfchw < 0)) {
		unsigned a, b, c = 0, d;
		have_prfchw = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8));
	}
	if (have_prfchw)
		__asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

static uint32_t frame_slots(void)
{
	return (uint32_t)((MT_FRAMES_HDR + (size_t)stack_depth * MT_FRAME_SIZE + 31) / 32);
}

// bin_frames writes the stack as a record's data (mt_abi.h) and returns
// the slots it takes, 0 where the thread sent it before; *id is its id.
static uint32_t bin_frames(char *blob, uint32_t *id)
{
	mt_rawframe fr[128];
	int stop = MT_STOP_END, by_rows = 0, reused = 0, known;
	unsigned gen;
	uint64_t *memo;
	int n = stack_raw(fr, &stop, &by_rows, &gen, &reused, &memo);
	if (by_rows) {
		tb.by_rows++;
		tb.fr_rows += (uint64_t)n;
		tb.fr_reused += (uint64_t)reused;
	} else {
		tb.by_bt++;
	}
	// The frames are those of the walks that reused the same kept walk
	// whole before: their id, while the table that gave it holds.
	const stk_table *t = tb.stk;
	if (memo && *memo && t && gen && t->stream == tb.stream && t->gen == gen &&
	    (uint32_t)(*memo >> 32) == t->epoch) {
		*id = (uint32_t)*memo;
		return 0;
	}
	*id = stk_find(fr, n, (uint32_t)stop, gen, &known);
	if (memo && *id && tb.stk)
		*memo = (uint64_t)tb.stk->epoch << 32 | *id;
	if (known)
		return 0;
	uint32_t count = (uint32_t)n, st = (uint32_t)stop;
	memcpy(blob, &count, 4);
	memcpy(blob + 4, &st, 4);
	char *o = blob + MT_FRAMES_HDR;
	for (int i = 0; i < n; i++, o += MT_FRAME_SIZE) {
		memcpy(o + MT_FRAME_ADDR, &fr[i].addr, 8);
		memcpy(o + MT_FRAME_OFF, &fr[i].off, 8);
		memcpy(o + MT_FRAME_FILE, &fr[i].file, 4);
	}
	return (uint32_t)((size_t)(o - blob) + 31) / 32;
}

static void bin_event_slow(int op, uint64_t ts, const void *p, uint64_t size);

// bin_event is the hot path: four stores and a release store of the count,
// into memory the consumer reads; everything else is bin_event_slow.
static ALWAYS_INLINE void bin_event(int op, uint64_t ts, const void *p, uint64_t size)
{
	uint32_t n = tb.n;
	if (LIKELY(n < tb.fast && tb.gen == name_gen)) {
		mt_rec *r = &tb.recs[n];
		r->ts = ts;
		r->ptr = (uint64_t)(uintptr_t)p;
		r->size = size;
		r->meta = (uint64_t)op;
		tb.n = n + 1;
		tb.busy = 0;
		__atomic_store_n(&tb.ch->committed, n + 1, __ATOMIC_RELEASE);
		return;
	}
	bin_event_slow(op, ts, p, size);
}

static void bin_event_slow(int op, uint64_t ts, const void *p, uint64_t size)
{
	if (UNLIKELY(!g_ready || g_off || bin_stopped())) {
		bin_unbusy();
		return;
	}
	uint32_t extra = stack_depth ? frame_slots() : 0;
	if (!bin_room(extra, ts)) {
		tb.lost++;
		bin_unbusy();
		return;
	}
	mt_rec *r = &tb.recs[tb.n];
	uint32_t id = 0;
	uint32_t ns = 0;
	if (tb.stacks) {
		// The record's line was last the reader's, on another CPU:
		// ask for it now, so that it comes over during the walk
		// rather than stall the first store after it.
		prefetch_write(r);
		ns = bin_frames((char *)(r + 1), &id);
	}
	r->ts = ts;
	r->ptr = (uint64_t)(uintptr_t)p;
	r->size = size;
	r->meta = (uint64_t)op | ((uint64_t)ns << MT_META_SLOTS_SHIFT) | ((uint64_t)id << MT_META_STACK_SHIFT);
	bin_done(tb.n + 1 + ns);
}

// bin_blob writes a record followed by n bytes of data (strings of the
// header and exec records).
static void bin_blob(int op, uint64_t ptr, uint64_t size, const char *data, size_t n, uint64_t ts)
{
	uint32_t ns = (uint32_t)((n + 31) / 32);
	if (bin_stopped())
		return;
	if (!ts) {
		ts = bin_ts();
	} else {
		// A time read earlier (a fork's): the record is in progress.
		tb.busy = 1;
		if (tb.ch)
			__atomic_store_n(&tb.ch->committed, tb.n | MT_COMMIT_BUSY, __ATOMIC_RELAXED);
	}
	if (!bin_room(ns, ts)) {
		tb.lost++;
		bin_unbusy();
		return;
	}
	mt_rec *r = &tb.recs[tb.n];
	if (n)
		memcpy(r + 1, data, n);
	r->ts = ts;
	r->ptr = ptr;
	r->size = size;
	r->meta = MT_META(op, ns, n);
	bin_done(tb.n + 1 + ns);
}

static void bin_thread_exit(void *arg)
{
	(void)arg;
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off)
		bin_blob(MT_OP_EXIT, 0, 0, NULL, 0, 0);
	bin_publish_lost();
	// Frees by later destructors send their frames: a table mapped for
	// them would outlive the thread.
	stk_free();
	tb.stk_done = 1;
	walk_thread_exit();
	// The chunk stays the thread's: frees made by later TLS destructors
	// still go there. The consumer frees it once the thread is gone.
	if (tb.ch)
		__atomic_store_n(&tb.ch->exiting, 1, __ATOMIC_RELEASE);
	t_in = in;
}

static void bin_process_exit(void)
{
	if (g_exiting)
		return;
	g_exiting = 1;
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off)
		bin_blob(MT_R_PROC_EXIT, (uint64_t)g_pid, 0, NULL, 0, 0);
	bin_publish_lost();
	t_in = in;
}

static void bin_before_exec(void)
{
	// The new image starts its own streams; this chunk is done.
	if (g_ready && !g_off) {
		bin_publish_lost();
		bin_seal();
	}
}

// ---------------------------------------------------------------------------
// The sink: one record per call, the free half timed before the real call.

// --sample (sample.c): an allocation goes when it is a sample, a free
// when it releases one. A sample leaves the table before the real free,
// since another thread may be given the address as soon as that returns;
// a call that then fails (realloc, munmap, mremap) puts it back.
static ALWAYS_INLINE int sampled_alloc(uint64_t size, const void *p)
{
	if (!sample_rate)
		return 1;
	if (!sample_take(size))
		return 0;
	if (sample_keep(p))
		return 1;
	// No room in the table: counted with the records lost, which the
	// closing lines and /metrics report.
	tb.lost++;
	return 0;
}

static ALWAYS_INLINE int sampled_free(const void *p)
{
	return !sample_rate || sample_forget(p);
}

static void bin_alloc(int op, uint64_t size, const void *p, uint64_t kind)
{
	(void)kind; // the converter tells mappings by their op
	if (sampled_alloc(size, p))
		bin_event(op, bin_ts(), p, size);
}

static void bin_free(int op, void *p, void (*real)(void *))
{
	if (!sampled_free(p)) {
		real(p);
		return;
	}
	uint64_t ts = bin_ts();
	real(p);
	bin_event(op, ts, p, 0);
}

static void bin_free_pre(mt_call_t *c, const void *p)
{
	c->log = sampled_free(p);
	c->ts = c->log ? bin_ts() : 0;
}

static void bin_free_post(mt_call_t *c, int op, const void *p)
{
	if (c->log)
		bin_event(op, c->ts, p, 0);
}

static void bin_realloc_pre(mt_call_t *c, const void *p)
{
	c->log = p && sampled_free(p);
	c->ts = c->log ? bin_ts() : 0;
}

static void bin_realloc_post(mt_call_t *c, int op, const void *p, const void *q, size_t n)
{
	// The consumer knows the old block's size; a failed realloc logs
	// nothing, realloc(p, 0) only the free.
	if (p && (q || n == 0)) {
		if (c->log)
			bin_event(MT_OP_FREE, c->ts, p, 0);
	} else if (p && c->log) {
		bin_unbusy();
		if (sample_rate)
			sample_keep(p);
	}
	if (q && sampled_alloc(n, q))
		bin_event(op, bin_ts(), q, n);
}

static void bin_unmap_post(mt_call_t *c, const void *p, size_t len, int ok)
{
	// Logged by the consumer only for a mapping it saw created.
	if (ok && c->log) {
		bin_event(MT_OP_MUNMAP, c->ts, p, len);
	} else if (c->log) {
		bin_unbusy();
		if (sample_rate)
			sample_keep(p);
	}
}

static void bin_remap_post(mt_call_t *c, const void *old, size_t oldlen, const void *r, size_t newlen)
{
	if (r != MAP_FAILED) {
		if (c->log)
			bin_event(MT_OP_MUNMAP, c->ts, old, oldlen);
		if (sampled_alloc(newlen, r))
			bin_event(MT_OP_MREMAP, bin_ts(), r, newlen);
	} else if (c->log) {
		bin_unbusy();
		if (sample_rate)
			sample_keep(old);
	}
}

const mt_sink bin_sink = {
	.alloc = bin_alloc,
	.free = bin_free,
	.free_pre = bin_free_pre,
	.free_post = bin_free_post,
	.realloc_pre = bin_realloc_pre,
	.realloc_post = bin_realloc_post,
	.unmap_pre = bin_free_pre,
	.unmap_post = bin_unmap_post,
	.remap_post = bin_remap_post,
	.before_exec = bin_before_exec,
	.process_exit = bin_process_exit,
};

// ---------------------------------------------------------------------------
// Attaching to the region, the start record, fork.

// ppid_of is process pid's parent, from /proc (-1 when it cannot tell).
static long ppid_of(long pid)
{
	char path[48], buf[512];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	// "pid (comm) S ppid ...": comm may hold anything, ')' too.
	char *r = strrchr(buf, ')');
	long pp;
	char st;
	if (!r || sscanf(r + 1, " %c %ld", &st, &pp) != 2)
		return -1;
	return pp;
}

// bin_attach maps the region named by MEMTRACE_SHM ("fd:dev:ino", or "off"
// when the parent does not want children traced).
int bin_attach(void)
{
	const char *s = getenv(MT_SHM_ENV);
	if (!s)
		return 0;
	set_sink(&bin_sink);
	int fd;
	unsigned long long dev, ino;
	if (strcmp(s, "off") == 0 || sscanf(s, "%d:%llu:%llu", &fd, &dev, &ino) != 3) {
		g_off = 1;
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino) {
		// Closed or reused by the program: never map someone else's file.
		g_off = 1;
		return 1;
	}
	const char *pp = getenv(MT_PPID_ENV);
	int by_parent = !follow && pp && *pp;
	// Not the program memtrace started: a child of it (its fork handler
	// turned the library off there and said so) that exec'd, or one
	// vforked or spawned. It says so (bin_start, with its command line)
	// and is untraced, and so is what it execs.
	if (by_parent) {
		long mt = strtol(pp, NULL, 10), parent = (long)getppid();
		if (parent != mt) {
			// Only the root's own children say so, as on the eBPF
			// path: deeper ones are the untraced children's.
			if (ppid_of(parent) != mt) {
				close(fd);
				setenv(MT_SHM_ENV, "off", 1);
				g_off = 1;
				return 1;
			}
			g_unfollowed = 1;
		}
	}
	mt_shm_hdr h;
	if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != MT_SHM_MAGIC || h.version != MT_SHM_VERSION) {
		err_line("MEMTRACE_SHM is not a memtrace region of this version: ", s);
		g_off = 1;
		return 1;
	}
	shm_len = (size_t)h.data_off + (size_t)h.chunk_size * h.n_chunks;
	if (h.n_small) {
		if ((uint64_t)h.small_off < (uint64_t)shm_len || h.small_size < 4096 || h.small_size > h.chunk_size) {
			err_line("MEMTRACE_SHM's region has a bad layout: ", s);
			g_off = 1;
			return 1;
		}
		shm_len = (size_t)h.small_off + (size_t)h.small_size * h.n_small;
	}
	void *m = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err_line("cannot map the shared region (address space?): ", s);
		g_off = 1;
		return 1;
	}
	if (((volatile mt_shm_hdr *)m)->stop) {
		// memtrace has detached or finished: this program runs
		// untraced, and so do the programs it execs.
		munmap(m, shm_len);
		close(fd);
		setenv(MT_SHM_ENV, "off", 1);
		g_off = 1;
		return 1;
	}
	shm = m;
	shm_state = (uint32_t *)((char *)m + MT_STATES_OFF);
	if (h.n_files && h.files_off >= MT_STATES_OFF &&
	    (uint64_t)h.files_off + (uint64_t)h.n_files * sizeof(mt_file) <= h.data_off) {
		shm_files = (mt_file *)((char *)m + h.files_off);
		shm_n_files = h.n_files;
	}
	shm_data = (char *)m + h.data_off;
	shm_small = (char *)m + h.small_off;
	if (fd < 900) {
		// Out of the way of the program's own descriptors, and open
		// across exec so that exec'd programs find the region.
		int hi = fcntl(fd, F_DUPFD, 900);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	char v[96];
	if (g_unfollowed) {
		// Its one record goes through the mapping; the descriptor
		// would only be inherited by its own forks.
		close(fd);
		strcpy(v, "off");
	} else if (follow || by_parent) {
		// Open across exec: followed children find the region, and
		// so does the program's own exec without --follow.
		int fl = fcntl(fd, F_GETFD);
		fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
		snprintf(v, sizeof v, "%d:%llu:%llu", fd, dev, ino);
	} else {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		strcpy(v, "off");
	}
	setenv(MT_SHM_ENV, v, 1);
	// The first process sets the time axis; the others share it.
	uint32_t zero = 0;
	if (__atomic_compare_exchange_n(&shm->clock_state, &zero, MT_CLOCK_SETTING, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		epoch_ns = mono_ns();
		clock_init(2);
		shm->epoch = epoch_ns;
		shm->clock_kind = use_counter ? MT_CLOCK_COUNTER : MT_CLOCK_MONOTONIC;
		shm->cnt0 = cnt0;
		shm->mono0 = mono0;
		shm->mult = cnt_mult;
		__atomic_store_n(&shm->clock_state, MT_CLOCK_READY, __ATOMIC_RELEASE);
	} else {
		for (int i = 0; i < 2000 && __atomic_load_n(&shm->clock_state, __ATOMIC_ACQUIRE) != MT_CLOCK_READY;
		     i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	shm_clock_kind = (int)shm->clock_kind;
	epoch_ns = shm->epoch;
	return zero == 0 ? 1 : 2;
}

static void bin_start_record(int exec_child)
{
	char comm[17], cmd[1024], blob[1100];
	read_comm(comm);
	read_cmdline(cmd, sizeof cmd);
	size_t n = 0;
	if (!exec_child) {
		memcpy(blob, VERSION, sizeof VERSION);
		n = sizeof VERSION;
	}
	size_t cl = strlen(comm) + 1, dl = strlen(cmd) + 1;
	memcpy(blob + n, comm, cl);
	n += cl;
	memcpy(blob + n, cmd, dl);
	n += dl;
	if (exec_child) {
		bin_blob(MT_R_EXEC, (uint64_t)g_pid, (uint64_t)getppid(), blob, n, 0);
	} else {
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		uint64_t real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
		bin_blob(MT_R_START, (uint64_t)g_pid, real, blob, n, 0);
	}
}

static void bin_atfork_prepare(void)
{
	// First: a thread asking the loader may hold the locks below.
	modules_atfork_prepare();
	sample_atfork_prepare();
	fork_serial = 0;
	if (g_ready && !g_off)
		fork_serial = __atomic_add_fetch(&shm->stream_next, 1, __ATOMIC_SEQ_CST);
	fork_ts = bin_now();
	fork_parent = getpid();
	bin_publish_lost();
}

static void bin_atfork_parent(void)
{
	modules_atfork_parent();
	sample_atfork_parent();
	fork_serial = 0;
}

static void bin_atfork_child(void)
{
	sample_atfork_child();
	int in = t_in;
	t_in = 1;
	modules_atfork_child();
	g_pid = getpid();
	// The chunk is the parent's: the child starts its own stream.
	tb.ch = NULL;
	tb.recs = NULL;
	tb.n = tb.cap = tb.fast = 0;
	tb.stream = 0;
	tb.lost = 0;
	tb.by_rows = tb.by_bt = 0;
	tb.fr_rows = tb.fr_reused = 0;
	walk_atfork_child();
	if (!follow) {
		// Untraced, but said: a log that leaves out a child's
		// allocations must not read as a complete one.
		if (g_ready && !g_off) {
			bin_new_stream();
			bin_blob(MT_R_UNTRACED, (uint64_t)g_pid, (uint64_t)fork_parent, NULL, 0, fork_ts);
			bin_seal();
		}
		g_off = 1;
	} else if (g_ready && !g_off) {
		tb.tid = gettid_raw();
		bin_new_stream();
		bin_blob(MT_R_FORK, (uint64_t)g_pid, (uint64_t)fork_parent, NULL, 0, fork_ts);
	}
	t_in = in;
}

void bin_start(int exec_child)
{
	if (g_unfollowed) {
		char comm[17], cmd[1024], blob[1100];
		read_comm(comm);
		read_cmdline(cmd, sizeof cmd);
		size_t cl = strlen(comm) + 1, dl = strlen(cmd) + 1;
		memcpy(blob, comm, cl);
		memcpy(blob + cl, cmd, dl);
		// g_ready stays 0 and no exit key is made: this one record is
		// all the process writes.
		tb.keyed = 1;
		bin_new_stream();
		bin_blob(MT_R_UNTRACED, (uint64_t)g_pid, (uint64_t)getppid(), blob, cl + dl, 0);
		bin_seal();
		g_off = 1;
		return;
	}
	pthread_key_create(&exit_key, bin_thread_exit);
	pthread_atfork(bin_atfork_prepare, bin_atfork_parent, bin_atfork_child);
	__atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
	bin_start_record(exec_child);
}

// ---------------------------------------------------------------------------
// File slots: the files frames lie in, named and given unwind rows by
// memtrace (mt_abi.h). A linear scan: it runs when the loader's list of
// objects changed, once per object.

uint32_t shm_file_slot(uint64_t dev, uint64_t ino, const char *path, size_t len)
{
	if (!shm_files || len == 0 || len > MT_FILE_PATH_MAX)
		return MT_NO_FILE;
	for (uint32_t i = 0; i < shm_n_files; i++) {
		mt_file *f = &shm_files[i];
		uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
		if (st >= MT_FILE_ASKED) {
			if (f->dev == dev && f->ino == ino)
				return i;
			continue;
		}
		if (st == MT_FILE_CLAIMED)
			continue; // another process is writing it
		uint32_t want = MT_FILE_FREE;
		if (!__atomic_compare_exchange_n(&f->state, &want, MT_FILE_CLAIMED, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (want >= MT_FILE_ASKED && f->dev == dev && f->ino == ino)
				return i;
			continue;
		}
		f->dev = dev;
		f->ino = ino;
		memcpy(f->path, path, len);
		f->path_len = (uint32_t)len;
		__atomic_store_n(&f->state, MT_FILE_ASKED, __ATOMIC_RELEASE);
		return i;
	}
	return MT_NO_FILE;
}

// A slot whose wait once ran out: later stacks through it do not wait.
static uint32_t gave_up[(4096 + 31) / 32];

// How long a stack through a file waits for its table: at most
// WAIT_FILE_NS, and no longer than WAIT_BEAT_NS without a heartbeat.
#define WAIT_FILE_NS 5000000000ull
#define WAIT_BEAT_NS 1000000000ull

uint32_t shm_wait_file(uint32_t idx)
{
	mt_file *f = &shm_files[idx];
	uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
	if (idx >= 4096 || (__atomic_load_n(&gave_up[idx / 32], __ATOMIC_RELAXED) & (1u << (idx % 32))))
		return st;
	// A wall-clock bound, not a count of sleeps: on a loaded machine a
	// sleep lasts longer than asked. The table is built in memtrace while
	// this thread waits; a stack taken without it is backtrace()'s, which
	// stops at code whose CFI is only in .debug_frame, so the wait is
	// generous while memtrace shows it is alive (its converter and table
	// builder beat) and short once it stops beating. 32-bit ARM never
	// waits: its walk is backtrace() (walk.c).
	uint32_t beat = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
	uint64_t start = mono_ns(), last_beat = start;
	while (st == MT_FILE_ASKED && !consumer_away()) {
		if (__atomic_load_n(&shm->gone, __ATOMIC_ACQUIRE) || __atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE))
			break;
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
		st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
		uint64_t now = mono_ns();
		uint32_t b = __atomic_load_n(&shm->beat, __ATOMIC_ACQUIRE);
		if (b != beat) {
			beat = b;
			last_beat = now;
		}
		if (now - start >= WAIT_FILE_NS || now - last_beat >= WAIT_BEAT_NS) {
			__atomic_fetch_or(&gave_up[idx / 32], 1u << (idx % 32), __ATOMIC_RELAXED);
			break;
		}
	}
	return st;
}

const mt_file *shm_file(uint32_t idx)
{
	return shm_files && idx < shm_n_files ? &shm_files[idx] : NULL;
}

const uint8_t *shm_span(uint64_t off, uint64_t len)
{
	if (!shm || off > shm_len || len > shm_len - off)
		return NULL;
	return (const uint8_t *)shm + off;
}
