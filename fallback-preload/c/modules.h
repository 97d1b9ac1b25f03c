// modules.h: the process's executable mappings, as the loader has them,
// cached: which file a PC lies in and at what offset, without asking the
// loader per frame. The cache is rebuilt when dl_iterate_phdr's
// dlpi_adds/dlpi_subs say a library was loaded or unloaded since.
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

// modules_begin makes the cache current and returns its sequence
// number; a reader that used the cache (modules_find) checks with
// modules_still that it was not rebuilt meanwhile, else its answers may be
// torn and must be dropped. 0 means no cache (a rebuild that did not
// finish in time): find nothing.
unsigned modules_begin(void);
int modules_still(unsigned seq);

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
