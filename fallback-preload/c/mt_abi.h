// mt_abi.h: the ABI between memtrace-preload.so and memtrace's Go reader
// (package preload): the binary mode's shared-memory region and its
// records (the op numbers are mt_ops.h's, generated from internal/ops).
// This file is the one source: Go does not copy it by hand; `go generate`
// in fallback-preload turns it into abi_gen.go (internal/mtabi parses it), and abi_test.go checks that the generated
// file is current and that every compiler (native and both cross targets)
// lays the structures out as the parser computed (read back from DWARF).
//
// What the parser reads: `#define MT_NAME value` with an integer or a
// string; `typedef struct { ... } mt_name;` with fields of
// uint8_t/uint16_t/uint32_t/uint64_t, several per line and arrays allowed.
// A field whose name ends in '_' is padding. Anything else is left to C.
//
// Everything is fixed-width and little-endian on every target (x86-64,
// arm64, 32-bit ARM): a 32-bit library writes what a 64-bit memtrace reads.
// Change the layout or a number only together with MT_SHM_VERSION.
#ifndef MT_ABI_H
#define MT_ABI_H

#include <stddef.h>
#include <stdint.h>

// The region is passed to the library as MT_SHM_ENV="fd:dev:ino" (or
// "off": children untraced); its header starts with MT_SHM_MAGIC and
// MT_SHM_VERSION, which the library checks before it maps the rest.
#define MT_SHM_ENV "MEMTRACE_SHM"
// Without --follow, memtrace names itself in MT_PPID_ENV (its pid): the
// program it started is its child, and only that process is traced,
// across its own execs; every other process (forked, spawned, exec'd
// below it) runs untraced, as on the eBPF path.
#define MT_PPID_ENV "MEMTRACE_PPID"
#define MT_SHM_MAGIC 0x4853544d
#define MT_SHM_VERSION 10

// The ops of call records (MT_OPS, MT_OP_*, numbered as Go's logfmt.Op)
// are generated from internal/ops/table.go into mt_ops.h. EXIT (a
// thread's end) has the last number below the record ops, so that adding
// an op moves no number; tables indexed by op have MT_NOPS entries.
#include "mt_ops.h"
#define MT_OP_EXIT 63
#define MT_NOPS 64

// Record ops past the call ops: what the converter needs besides calls.
#define MT_R_NAME 64      // the thread's name: MT_NAME_LEN bytes from ptr (ptr and size)
#define MT_R_START 65     // the session's first process: ptr pid, size CLOCK_REALTIME ns; data "version\0comm\0cmd\0"
#define MT_R_EXEC 66      // an exec'd image: ptr pid, size ppid; data "comm\0cmd\0"
#define MT_R_FORK 67      // a forked child's first record: ptr pid, size ppid
#define MT_R_PROC_EXIT 68 // the process exits (exit, _exit): ptr pid
// A process not traced (no --follow: not memtrace's child): ptr pid, size
// ppid; data "comm\0cmd\0" from an exec'd image, none at a fork. The last
// record of its stream.
#define MT_R_UNTRACED 69
#define MT_NAME_LEN 16

// Region: the header (one page), then at MT_STATES_OFF one uint32 state
// per chunk, then at files_off n_files mt_file slots, at rows_off
// rows_len bytes of unwind rows (memtrace's), then at data_off the
// n_chunks large chunks, chunk_size bytes each, and at small_off the
// n_small small ones, small_size bytes each (chunk n_chunks + k is the
// k-th small one): an mt_chunk_hdr and records. A thread writes its first
// chunk's worth into a small chunk and the rest into large ones: a live
// thread holds a chunk, and most threads of a program with thousands
// write little.
#define MT_STATES_OFF 4096
#define MT_STATE_SIZE 4 // bytes per chunk state (a uint32_t)
#define MT_CH_OWNED 1 // a thread writes into the chunk
#define MT_CH_FREE 2  // emptied by the consumer, to be claimed again

// clock_state: the session's first process sets the time axis.
#define MT_CLOCK_SETTING 1
#define MT_CLOCK_READY 2
// clock_kind: what a record's ts counts.
#define MT_CLOCK_MONOTONIC 0 // CLOCK_MONOTONIC ns
#define MT_CLOCK_COUNTER 1   // counter ticks: ns = mono0 + (ts - cnt0) * mult >> 32

typedef struct {
	uint32_t magic, version, chunk_size, n_chunks; // written by memtrace
	uint32_t hw;          // chunks ever handed out
	uint32_t n_free;      // chunks in state MT_CH_FREE
	uint32_t clock_state, clock_kind;
	uint64_t epoch;       // CLOCK_MONOTONIC ns at the session's start
	uint64_t cnt0, mono0, mult;
	uint32_t lost;        // records dropped by the library
	uint32_t beat;        // the consumer's heartbeat (it polls)
	uint32_t stream_next; // the last stream serial handed out
	uint32_t gone;        // memtrace finished: never wait for a chunk
	uint32_t data_off;    // written by memtrace
	uint32_t files_off, n_files; // the file slots (memtrace)
	uint32_t rows_off, rows_len; // the unwind rows' area (memtrace)
	uint32_t stacks_rows; // stacks walked over the rows (the library)
	uint32_t stacks_bt;   // stacks taken by backtrace() (the library)
	uint32_t pad_;
	uint64_t frames_rows;   // frames of the stacks walked over the rows
	uint64_t frames_reused; // of those, copied from the thread's previous walk
	// stop: memtrace detached (Ctrl-C) or finished; alone on its cache
	// line, which nobody writes again once it is set.
	uint32_t stop;
	uint32_t pad2_[15];
	uint32_t n_small, small_size, small_off; // written by memtrace
	uint32_t hw_small;     // small chunks ever handed out
	uint32_t n_free_small; // small chunks in state MT_CH_FREE
} mt_shm_hdr;

typedef struct {
	uint32_t committed; // records written (release store), extra slots included
	uint32_t sealed;    // the thread moved on: nothing more comes
	uint32_t pid, tid;
	uint32_t stream;    // the thread's stream serial; stored last (0: not ready)
	uint32_t seq;       // the chunk's place in its stream
	// exiting: the thread ran the library's key destructor and is
	// ending. Later destructors may still write, so the chunk is not
	// sealed; the consumer looks for the thread's end at each pass
	// rather than at its rare sweep of every idle chunk, so that a churn
	// of short threads gives its chunks back as fast as they end.
	uint32_t exiting;
	uint32_t pad_;
	// t_min: no record of the chunk is older (raw, as a record's ts): a
	// thread takes a chunk before it reads the time of its next record,
	// or in the middle of one, whose time it then puts here.
	uint64_t t_min;
	uint32_t pad2_[6];
} mt_chunk_hdr;

// committed has MT_COMMIT_BUSY set while the thread holds a record whose
// time it has read and that it has not committed yet (in the real call,
// in its stack walk, preempted, or waiting for its next chunk): memtrace
// writes no later record of another thread before it (converter.bound).
// A chunk sealed with it set leaves the stream busy until the thread's
// next chunk is out (which has the bit set from the start if the record
// is still in progress), or the thread is gone.
#define MT_COMMIT_BUSY 0x80000000

typedef struct {
	uint64_t ts, ptr, size;
	// meta: op (16 bits) | extra slots << MT_META_SLOTS_SHIFT (16 bits:
	// mt_rec-sized slots of data that follow) | data bytes <<
	// MT_META_LEN_SHIFT (0: all the slots). A call record (op below
	// MT_R_NAME) has no length there but its stack's id
	// (MT_META_STACK_SHIFT, below).
	uint64_t meta;
} mt_rec;

#define MT_META_SLOTS_SHIFT 16
#define MT_META_LEN_SHIFT 32
#define MT_META_STACK_SHIFT 32
#define MT_META(op, slots, len) \
	((uint64_t)(op) | ((uint64_t)(slots) << MT_META_SLOTS_SHIFT) | ((uint64_t)(len) << MT_META_LEN_SHIFT))

// A call record with a stack has frames as its data: a uint32 count and
// a uint32 stop reason (MT_FRAMES_HDR bytes; MT_STOP_*, the numbers of
// Go's event.StopReason), then per frame MT_FRAME_SIZE bytes: the uint64
// address at MT_FRAME_ADDR, the uint64 offset in its file at
// MT_FRAME_OFF, the uint32 file slot at MT_FRAME_FILE (MT_NO_FILE: in no
// file, the offset 0). Packed: read and write it with memcpy. Frames carry
// no names: memtrace names them from the file and the offset, as it names
// the eBPF path's.
//
// A thread sends each stack once: a call record's stack id (meta's bits
// from MT_META_STACK_SHIFT; ids count from 1 in each stream, 0 is none)
// on a record with frames names those frames; on a record without data
// it stands for the frames its stream last sent under that id. An id is
// sent again with other frames once the thread's table forgot it (a full
// table starts over from id 1), so the reader keeps, per stream, the
// latest frames of each id, never more than MT_STACK_ID_MAX of them.
#define MT_STACK_ID_MAX 16384
#define MT_FRAMES_HDR 8
#define MT_FRAME_ADDR 0
#define MT_FRAME_OFF 8
#define MT_FRAME_FILE 16
#define MT_FRAME_SIZE 20
#define MT_NO_FILE 0xffffffff
#define MT_STOP_END 1   // the outermost frame, or backtrace() ended
#define MT_STOP_DEPTH 2 // more frames than the stack depth: cut there
#define MT_STOP_NO_INFO 3 // backtrace() ended at the hook's caller, which has no unwind entry (32-bit ARM)

// A file slot names one ELF file that frames lie in, for every process of
// the session (slots are shared: a file is named, and its table built,
// once). The library claims a free slot (MT_FILE_FREE -> MT_FILE_CLAIMED,
// a compare-and-swap), writes dev, ino and the path it mapped, then
// stores MT_FILE_ASKED; memtrace names the file, builds its unwind rows
// (docs/unwind.md's row ABI) from the file if its dev and ino still match,
// writes them into the rows' area, and stores MT_FILE_READY (rows_off,
// n_rows, ext_off, n_ext, base, arch set before) or MT_FILE_NO_TABLE.
// Slots are never freed.
#define MT_FILE_FREE 0
#define MT_FILE_CLAIMED 1
#define MT_FILE_ASKED 2
#define MT_FILE_READY 3
#define MT_FILE_NO_TABLE 4
#define MT_FILE_PATH_MAX 448
#define MT_ARCH_AMD64 1 // unwind.ArchAMD64
#define MT_ARCH_ARM64 2 // unwind.ArchARM64

typedef struct {
	uint32_t state, path_len;
	uint64_t dev, ino;
	uint64_t base;     // the ELF vaddr of row pc 0 (unwind.Table.Base)
	uint32_t rows_off; // from the region's start, 8-byte rows
	uint32_t n_rows;
	uint32_t ext_off;  // from the region's start, 16-byte extended rules
	uint32_t n_ext;
	uint32_t arch;     // MT_ARCH_* of the rows
	uint32_t pad_[3];
	uint8_t path[448]; // MT_FILE_PATH_MAX, not NUL-terminated
} mt_file;

// The row ABI (docs/unwind.md "Row layout"): what the library's walker
// reads of the rows memtrace writes.
#define MT_ROW_SIZE 8
#define MT_EXT_SIZE 16
#define MT_CFA_GAP 0
#define MT_CFA_SP 1
#define MT_CFA_FP 2
#define MT_CFA_PLT 3
#define MT_CFA_END 4
#define MT_CFA_UNSUPPORTED 5
#define MT_CFA_EXTENDED 6

// The design's assumptions, checked by every compiler that builds the
// library (Go checks the same numbers through the generated file).
_Static_assert(sizeof(mt_rec) == 32, "a record is 32 bytes");
_Static_assert(sizeof(mt_chunk_hdr) == 64, "a chunk header is 64 bytes");
_Static_assert(offsetof(mt_shm_hdr, stop) == 128, "stop starts its own cache line");
_Static_assert(sizeof(mt_shm_hdr) <= MT_STATES_OFF, "the header fits its page");
_Static_assert(MT_NCALLOPS <= MT_OP_EXIT && MT_NOPS == MT_OP_EXIT + 1 && MT_NOPS <= MT_R_NAME,
	       "call ops, EXIT and record ops do not overlap");
_Static_assert(sizeof(uint32_t) == MT_STATE_SIZE, "a chunk state is a uint32_t");
_Static_assert(sizeof(mt_file) == 512, "a file slot is 512 bytes");
_Static_assert(sizeof(((mt_file *)0)->path) == MT_FILE_PATH_MAX, "the path field is MT_FILE_PATH_MAX bytes");

#endif
