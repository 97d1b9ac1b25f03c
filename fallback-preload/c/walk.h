// walk.h: the stack walk over the unwind rows memtrace builds from each
// file's .eh_frame (the rows the BPF walker reads; docs/unwind.md), in
// the traced thread. x86-64 and arm64; elsewhere, and wherever a row is
// missing, stack.c takes glibc's backtrace() instead.
#ifndef MT_WALK_H
#define MT_WALK_H

#include "mt.h"

#pragma GCC visibility push(hidden)

typedef struct {
	uint64_t addr, off; // the PC (a return address but for frame #0) and its file offset
	uint32_t file;      // the region's file slot, MT_NO_FILE
} mt_rawframe;

// walk_rows fills out with up to max frames of the calling thread, the
// library's own left out, frame #0 the allocation function's caller. It
// returns the count and sets *stop (MT_STOP_END: the outermost frame
// was reached; MT_STOP_DEPTH: there were more), or returns -1 where the
// rows cannot take the whole stack (no rows for a PC yet, a rule they do
// not express, a read outside the thread's stack): the caller walks
// another way. Call with modules_begin's cache current, seq its number.
// *reused: the frames copied from the thread's previous walk (walk.c).
// *memo: NULL, or, where every frame came whole from one kept walk of the
// thread, that kept walk's memo word: the caller's to keep what it made
// of these frames (a stack id). walk.c clears the word whenever the kept
// walk changes, so a nonzero word is always about the frames of this
// walk; it is the calling thread's, until its next walk_rows.
int walk_rows(mt_rawframe *out, int max, int *stop, unsigned seq, int *reused, uint64_t **memo);

// The thread ends (its record of the last walk goes back to the pool),
// and, in a forked child, the other threads are gone.
void walk_thread_exit(void);
void walk_atfork_child(void);

// The calling thread's stack ends at this address (0: unknown).
uintptr_t walk_stack_top(void);

#pragma GCC visibility pop

#endif
