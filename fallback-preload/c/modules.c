// modules.c: the cached table of the process's executable segments (see
// modules.h). Lock-free for readers, and without asking the loader while
// no dlclose began since the table was checked: a sequence number, odd while the
// table is rebuilt in place. The table is a fixed array, so a reader
// racing a rebuild reads stale or mixed entries, never freed memory, and
// modules_still tells it to drop what it found.
#include "modules.h"

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define MAX_SEGS 2048

// closes: the count of dlcloses ended before the table was checked
// against the loader with none under way (NO_CLOSES: not so checked).
#define NO_CLOSES (~0ul)

static struct {
	unsigned seq;
	int valid;
	unsigned long long adds, subs;
	unsigned long closes;
	uint64_t gen;
	int n;
	mt_seg segs[MAX_SEGS];
} mods = {.closes = NO_CLOSES};
static spin_t mods_lock;

// The dlcloses begun and ended (modules.h): the table holds for as long
// as no dlclose began since it was checked.
static unsigned long closes_begun, closes_ended;

void modules_close_begin(void)
{
	__atomic_add_fetch(&closes_begun, 1, __ATOMIC_SEQ_CST);
}

void modules_close_end(void)
{
	__atomic_add_fetch(&closes_ended, 1, __ATOMIC_SEQ_CST);
}

// closes_quiet returns the count of dlcloses ended, NO_CLOSES while one is
// under way. Read before asking the loader: every dlclose it counts had
// ended before, so the loader's answer has it.
static unsigned long closes_quiet(void)
{
	unsigned long e = __atomic_load_n(&closes_ended, __ATOMIC_SEQ_CST);
	unsigned long b = __atomic_load_n(&closes_begun, __ATOMIC_SEQ_CST);
	return b == e ? e : NO_CLOSES;
}

// t_misses counts the PCs the thread found in no segment of the table.
static __thread unsigned t_misses TLS_IE;

typedef struct {
	unsigned long long adds, subs;
} counts_t;

static int counts_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	counts_t *c = data;
	c->adds = info->dlpi_adds;
	c->subs = info->dlpi_subs;
	return 1; // the counts are the same for every object: one is enough
}

typedef struct {
	int first, n;
	counts_t c;
	mt_seg *segs;
} build_t;

// file_of names an object's file in the region: its path as the loader
// opened it (the program's own through /proc/self/exe), its dev and ino.
static uint32_t file_of(const char *name, int main_prog)
{
	char exe[MT_FILE_PATH_MAX + 1];
	const char *path = name;
	if (main_prog) {
		ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (l <= 0 || l >= (ssize_t)sizeof exe - 1)
			return MT_NO_FILE;
		exe[l] = 0;
		path = exe;
	} else if (!name || !strchr(name, '/')) {
		return MT_NO_FILE; // the vDSO ("linux-vdso.so.1"): no file
	}
	// The file's dev and ino through an open descriptor, stat() only
	// where open fails (an executable without read permission): the
	// same inode natively, but qemu-user's stat() misses the guest's
	// file twice: of /proc/self/exe it gives the host's link, to qemu
	// itself (qemu opens the guest's program, and readlink names it),
	// and on 32-bit ARM, where glibc's stat is statx, it ignores the
	// -L prefix and finds no /lib/libc.so.6. memtrace then built no
	// table for the program, or the frames had no file at all.
	const char *at = main_prog ? "/proc/self/exe" : path;
	struct stat st;
	int fd = open(at, O_RDONLY | O_CLOEXEC);
	int bad = fd < 0 || fstat(fd, &st) != 0;
	if (fd >= 0)
		close(fd);
	if (bad && stat(at, &st) != 0)
		return MT_NO_FILE;
	return shm_file_slot((uint64_t)st.st_dev, (uint64_t)st.st_ino, path, strlen(path));
}

static int build_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	build_t *b = data;
	int main_prog = b->first && (!info->dlpi_name || !info->dlpi_name[0]);
	b->first = 0;
	b->c.adds = info->dlpi_adds;
	b->c.subs = info->dlpi_subs;
	uint32_t file = MT_NO_FILE;
	int named = 0, first = b->n, self = 0;
	uintptr_t self_pc = (uintptr_t)&build_cb;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || b->n >= MAX_SEGS)
			continue;
		if (!named) {
			file = file_of(info->dlpi_name, main_prog);
			named = 1;
		}
		mt_seg *s = &b->segs[b->n++];
		s->lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
		s->hi = s->lo + (uintptr_t)ph->p_memsz;
		s->adj = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr - (uintptr_t)ph->p_offset;
		s->bias = (uintptr_t)info->dlpi_addr;
		s->file = file;
		s->self = 0;
		if (self_pc >= s->lo && self_pc < s->hi)
			self = 1;
	}
	// This library's segments: its own frames are left out of stacks.
	for (int k = first; self && k < b->n; k++)
		b->segs[k].self = 1;
	return 0;
}

// rebuild asks the loader for the table, into memory of its own, and
// puts it in place of the table's where it is newer (the loader's counts
// only grow): *c and *closes become its counts and closes_quiet's. The
// table's lock is not held while the loader is asked, whose lock a
// thread inside dlopen or dlclose holds while it allocates: that thread's
// walk waits for no rebuild that waits for it. 0: no memory.
static int rebuild(counts_t *c, unsigned long *closes)
{
	size_t size = MAX_SEGS * sizeof(mt_seg);
	mt_seg *segs = raw_map(size);
	if (!segs)
		return 0;
	*closes = closes_quiet();
	build_t b = {.first = 1, .c = *c, .segs = segs};
	dl_iterate_phdr(build_cb, &b);
	// Sorted by address for the binary search (a few dozen entries).
	for (int i = 1; i < b.n; i++) {
		mt_seg s = segs[i];
		int j = i - 1;
		while (j >= 0 && segs[j].lo > s.lo) {
			segs[j + 1] = segs[j];
			j--;
		}
		segs[j + 1] = s;
	}
	*c = b.c;
	spin_lock(&mods_lock);
	if (!mods.valid ||
	    (b.c.adds >= mods.adds && b.c.subs >= mods.subs && (b.c.adds != mods.adds || b.c.subs != mods.subs))) {
		__atomic_store_n(&mods.seq, mods.seq + 1, __ATOMIC_RELAXED); // odd
		__atomic_thread_fence(__ATOMIC_RELEASE);
		memcpy(mods.segs, segs, (size_t)b.n * sizeof(mt_seg));
		mods.n = b.n;
		mods.adds = b.c.adds;
		mods.subs = b.c.subs;
		__atomic_store_n(&mods.closes, *closes, __ATOMIC_RELAXED);
		mods.valid = 1;
		mods.gen++;
		__atomic_store_n(&mods.seq, mods.seq + 1, __ATOMIC_RELEASE); // even
	}
	spin_unlock(&mods_lock);
	raw_unmap(segs, size);
	return 1;
}

// askers counts the threads in modules_begin's calls to the loader;
// forking is set between a fork's prepare and parent handlers (see
// modules.h).
static int askers;
static int forking;

void modules_atfork_prepare(void)
{
	__atomic_store_n(&forking, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&askers, __ATOMIC_SEQ_CST) > 0)
		sched_yield();
}

void modules_atfork_parent(void)
{
	__atomic_store_n(&forking, 0, __ATOMIC_RELEASE);
}

// modules_current is the table's sequence number without asking the
// loader: 0 when there is none whole.
static unsigned modules_current(void)
{
	unsigned s = __atomic_load_n(&mods.seq, __ATOMIC_ACQUIRE);
	if ((s & 1) || !__atomic_load_n(&mods.valid, __ATOMIC_RELAXED))
		return 0;
	return s | 0x80000000u;
}

static unsigned modules_refresh(void);

// modules_fast returns the table's sequence number where no dlclose began
// since it was checked against the loader, else 0. A library the loader
// added since (a dlopen) leaves the table as it was for every other PC:
// a PC in no segment makes stack_raw ask the loader (modules_misses).
static ALWAYS_INLINE unsigned modules_fast(void)
{
	unsigned s = __atomic_load_n(&mods.seq, __ATOMIC_ACQUIRE);
	if (UNLIKELY(s & 1))
		return 0;
	unsigned long e = __atomic_load_n(&closes_ended, __ATOMIC_ACQUIRE);
	unsigned long b = __atomic_load_n(&closes_begun, __ATOMIC_RELAXED);
	if (UNLIKELY(b != e || __atomic_load_n(&mods.closes, __ATOMIC_RELAXED) != e ||
		     !__atomic_load_n(&mods.valid, __ATOMIC_RELAXED)))
		return 0;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&mods.seq, __ATOMIC_RELAXED) != s)
		return 0;
	return s | 0x80000000u;
}

unsigned modules_begin(void)
{
	unsigned s = modules_fast();
	if (LIKELY(s))
		return s;
	return modules_check();
}

unsigned modules_check(void)
{
	__atomic_add_fetch(&askers, 1, __ATOMIC_SEQ_CST);
	if (UNLIKELY(__atomic_load_n(&forking, __ATOMIC_SEQ_CST))) {
		__atomic_sub_fetch(&askers, 1, __ATOMIC_RELEASE);
		return modules_current();
	}
	unsigned s = modules_refresh();
	__atomic_sub_fetch(&askers, 1, __ATOMIC_RELEASE);
	return s;
}

unsigned modules_misses(void)
{
	return t_misses;
}

static unsigned modules_refresh(void)
{
	counts_t c = {0, 0};
	unsigned long closes = closes_quiet();
	dl_iterate_phdr(counts_cb, &c);
	for (int tries = 0; tries < 100000; tries++) {
		unsigned s = __atomic_load_n(&mods.seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			if (tries > 100)
				sched_yield();
			continue;
		}
		if (__atomic_load_n(&mods.valid, __ATOMIC_RELAXED) &&
		    __atomic_load_n(&mods.adds, __ATOMIC_RELAXED) == c.adds &&
		    __atomic_load_n(&mods.subs, __ATOMIC_RELAXED) == c.subs) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&mods.seq, __ATOMIC_RELAXED) != s)
				continue;
			// The table is the loader's as of the counts, which
			// came after every dlclose counted in closes: the
			// walks after this one need not ask until another.
			if (closes != NO_CLOSES && __atomic_load_n(&mods.closes, __ATOMIC_RELAXED) != closes) {
				spin_lock(&mods_lock);
				if (mods.seq == s)
					__atomic_store_n(&mods.closes, closes, __ATOMIC_RELAXED);
				spin_unlock(&mods_lock);
			}
			return s | 0x80000000u; // never 0
		}
		if (!rebuild(&c, &closes))
			return 0;
	}
	return 0;
}

int modules_still(unsigned seq)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return seq && (__atomic_load_n(&mods.seq, __ATOMIC_RELAXED) | 0x80000000u) == seq;
}

const mt_seg *modules_find(uintptr_t pc)
{
	int lo = 0, hi = __atomic_load_n(&mods.n, __ATOMIC_RELAXED);
	if (hi > MAX_SEGS)
		hi = MAX_SEGS;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const mt_seg *s = &mods.segs[mid];
		if (pc < s->lo)
			hi = mid;
		else if (pc >= s->hi)
			lo = mid + 1;
		else
			return s;
	}
	t_misses++;
	return NULL;
}

uint64_t modules_generation(void)
{
	return __atomic_load_n(&mods.gen, __ATOMIC_RELAXED);
}

void modules_atfork_child(void)
{
	askers = 0;
	forking = 0;
	mods_lock.v = 0;
	// A dlclose another thread had under way ends in the parent only:
	// the child asks the loader at its next stack.
	if (closes_begun != closes_ended) {
		closes_begun = closes_ended;
		mods.closes = NO_CLOSES;
	}
	if (mods.seq & 1) {
		// The fork came in the middle of a rebuild by another thread:
		// the table is half built; the next walk builds it again.
		mods.valid = 0;
		mods.seq++;
	}
}
