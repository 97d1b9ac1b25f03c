// stack.h: call stacks for MEMTRACK_STACK_DEPTH. The binary mode sends
// raw frames (an address, its file and offset; memtrace names them as it
// names the eBPF path's); the text mode, which has nobody to name them,
// formats names it resolves once per distinct PC (text.c: memtrack's
// lines).
#ifndef MT_STACK_H
#define MT_STACK_H

#include "mt.h"
#include "walk.h"

#pragma GCC visibility push(hidden)

// stack_raw fills out (room for stack_depth frames) with the calling
// thread's frames, the library's own left out, frame #0 the caller of
// the allocation function, and returns their count; *stop is MT_STOP_END
// or MT_STOP_DEPTH (more frames than stack_depth). The walk takes
// memtrace's unwind rows where they cover every frame, else glibc's
// backtrace() (*by_rows says which); *reused of the frames over the rows
// were the thread's previous walk's. *gen is the module table's sequence
// the frames' files and offsets were read under, 0 where the table
// changed during every try (the frames may then be torn: keep them
// nowhere). *memo: walk_rows' memo word for these frames, or NULL.
int stack_raw(mt_rawframe *out, int *stop, int *by_rows, unsigned *gen, int *reused, uint64_t **memo);

typedef struct {
	uintptr_t addr; // return address
	uintptr_t off;  // from the symbol, else from the module's base; 0 without a module
	const char *mod; // the module's path, NULL when unknown
	const char *sym; // the (mangled) symbol, NULL when unknown or without a module
} mt_frame;

// stack_walk calls fn for up to stack_depth frames of the calling thread,
// as stack_raw finds them, named by dladdr (once per PC: a bounded cache).
void stack_walk(void (*fn)(void *ctx, const mt_frame *f), void *ctx);

#pragma GCC visibility pop

#endif
