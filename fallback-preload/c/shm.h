// shm.h: the binary mode (memtrace --preload), shm.c.
#ifndef MT_SHM_H
#define MT_SHM_H

#include "mt.h"

#pragma GCC visibility push(hidden)

// bin_attach maps the region named by MT_SHM_ENV and makes the binary
// sink current. 0: not asked for (text mode); 1: binary mode, the
// session's first process; 2: binary mode, an exec'd program. g_off is set
// when the region is not usable.
int bin_attach(void);
// bin_start registers the thread and fork handlers, marks the library
// ready and writes the start (or exec) record.
void bin_start(int exec_child);

// The region's file slots (mt_abi.h), binary mode with stacks only.
// shm_file_slot finds the slot of (dev, ino) or claims one for it, and
// returns MT_NO_FILE without a region or a free slot; shm_file returns a
// slot, NULL for MT_NO_FILE; shm_span returns the region's bytes [off,
// off+len), NULL where they are not all inside it.
uint32_t shm_file_slot(uint64_t dev, uint64_t ino, const char *path, size_t len);
const mt_file *shm_file(uint32_t idx);
// shm_wait_file waits for memtrace to settle a slot the process asked
// about (a stack taken without the table is backtrace()'s, which is cut
// where CFI is only in .debug_frame), once per slot and process, bounded,
// and never when memtrace is not there or has stopped beating; it
// returns the slot's state.
uint32_t shm_wait_file(uint32_t idx);
const uint8_t *shm_span(uint64_t off, uint64_t len);

#pragma GCC visibility pop

#endif
