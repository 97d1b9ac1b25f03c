// modules.h: the process's executable mappings, as the loader has them,
// cached: which file a PC lies in and at what offset, without asking the
// loader per frame. The cache is rebuilt when dl_iterate_phdr's
// dlpi_adds/dlpi_subs say a library was loaded or unloaded since. The
// loader is asked only where the table may be stale: after a dlclose
// (hooks.c brackets each with modules_close_begin/end: only an unload can
// put another file where the table has one), and where a PC lies in no
// segment (a library loaded since, by dlopen or by the C library itself).
// The C library's own unloads (__libc_dlclose: of gconv modules at
// __libc_freeres) do not pass through the hook: a library loaded after
// one at the same address would take the table's old file for its PCs.
#ifndef MT_MODULES_H
#define MT_MODULES_H

#include "mt.h"

#pragma GCC visibility push(hidden)

// One executable PT_LOAD segment of a loaded object.
typedef struct {
	uintptr_t lo, hi; // its runtime range
	uintptr_t adj;    // the file offset of a PC in it is pc - adj
	uintptr_t bias;   // the object's load bias: ELF vaddr = pc - bias
	uint32_t file;    // the region's file slot (binary mode), else MT_NO_FILE
	uint32_t self;    // this library's own code
} mt_seg;

// modules_begin makes the cache current (asking the loader only after a
// dlclose) and returns its sequence number; modules_check asks the loader
// in any case; a reader that used the cache (modules_find) checks with
// modules_still that it was not rebuilt meanwhile, else its answers may be
// torn and must be dropped. 0 means no cache (a rebuild that did not
// finish in time): find nothing.
unsigned modules_begin(void);
unsigned modules_check(void);
int modules_still(unsigned seq);

// modules_misses counts the PCs the calling thread's modules_find found
// in no segment: a walk that took the table without asking the loader
// and met one asks it then (modules_check), and walks again where the
// table changed.
unsigned modules_misses(void);

// A dlclose begins and ends (hooks.c): while one is under way, and until
// a walk after it checked the table, every walk asks the loader.
void modules_close_begin(void);
void modules_close_end(void);

// modules_find returns the segment that holds pc, or NULL.
const mt_seg *modules_find(uintptr_t pc);

// modules_generation counts the loader's changes seen (text mode's
// frame cache is keyed on it).
uint64_t modules_generation(void);

// The fork handlers: before the fork, in the parent after it, and in the
// child (where a lock another thread held at the fork is free). The
// loader's lock that dl_iterate_phdr takes (dl_load_write_lock) is one
// glibc's fork does not reset in the child, so modules_begin in another
// thread at the moment of a fork left the child waiting for it for ever
// at its first stack: the prepare handler waits for the calls under way
// to end, and until the fork is done modules_begin does not ask the
// loader but answers with the table as it is. Nothing waits on a fork:
// a thread that holds one of the library's locks never blocks it.
void modules_atfork_prepare(void);
void modules_atfork_parent(void);
void modules_atfork_child(void);

#pragma GCC visibility pop

#endif
