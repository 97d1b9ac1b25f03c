// stack.h: call stacks for MEMTRACK_STACK_DEPTH, in glibc backtrace's
// terms. Each mode formats the frames its own way (text.c: memtrack's
// lines; shm.c: the binary frames of mt_abi.h).
#ifndef MT_STACK_H
#define MT_STACK_H

#include "mt.h"

#pragma GCC visibility push(hidden)

typedef struct {
	uintptr_t addr; // return address
	uintptr_t off;  // from the symbol, else from the module's base; 0 without a module
	const char *mod; // the module's path, NULL when unknown
	const char *sym; // the (mangled) symbol, NULL when unknown or without a module
} mt_frame;

// stack_walk calls fn for up to stack_depth frames of the calling thread,
// the library's own frames left out, frame #0 first (the caller of the
// allocation function).
void stack_walk(void (*fn)(void *ctx, const mt_frame *f), void *ctx);

#pragma GCC visibility pop

#endif
