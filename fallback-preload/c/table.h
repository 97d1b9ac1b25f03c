// table.h: the ptr -> size table of the text mode (free lines carry the
// block's size; the binary mode leaves that to the converter). A value
// packs size << 2 | V_MMAP | V_LOGGED (mt.h).
#ifndef MT_TABLE_H
#define MT_TABLE_H

#include "mt.h"

#pragma GCC visibility push(hidden)

void tbl_put(const void *p, uint64_t val);
// tbl_take removes p and reports whether it was there, with its value.
int tbl_take(const void *p, uint64_t *val);

// Fork: the prepare handler takes every shard's lock so that the child
// inherits none held by a thread that does not exist there.
void tbl_lock_all(void);
void tbl_unlock_all(void);

#pragma GCC visibility pop

#endif
