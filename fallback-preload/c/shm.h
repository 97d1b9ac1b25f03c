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

#pragma GCC visibility pop

#endif
