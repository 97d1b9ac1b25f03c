/* memtrace event ABI: the one definition shared by the BPF programs and the
 * Go agent (tracer/abi.go mirrors it; tracer/abi_test.go checks sizes and
 * offsets against the generated BTF, so a change here that is not made there
 * fails the tests). Op numbers equal logfmt.Op values.
 */
#ifndef MEMTRACE_H
#define MEMTRACE_H

/* enum mt_op: generated from internal/ops/table.go. */
#include "mt_ops.h"

enum mt_kind {
	MT_EV_ALLOC = 1,   /* ptr, size */
	MT_EV_FREE = 2,    /* ptr (size from the agent's live map; munmap: size) */
	MT_EV_REALLOC = 3, /* free old_ptr (old_size for mremap), then alloc ptr, size; no longer
			    * sent: realloc's free and alloc go apart, each with its own time */
	MT_EV_EXIT = 4,    /* thread exit */
	MT_EV_FORK = 5,    /* tgid forked a process: ptr = the child's pid; flags: MT_FLAG_HELD, MT_FLAG_UNFOLLOWED */
	MT_EV_EXEC = 6,    /* tgid exec'd; flags: MT_FLAG_HELD */
};

/* The attach cookie: the 64 bits a probe point's program is given
 * (bpf_get_attach_cookie), so that one program serves every function. This
 * is its one description; tracer/abi.go's cookie() is its one encoder,
 * MT_CK() its one decoder, and tracer/abi_test.go decodes cookies that Go
 * encoded with these macros, compiled. Every cookie has
 *   MT_CK_OP           bits  0-7   enum mt_op
 *   MT_CK_SIG          bits  8-15  enum mt_sig: how the size argument is found
 * and the rest by its signature. For MT_SIG_FREE_CHECKED (free on x86,
 * direct_internal_call):
 *   MT_CK_FREE_DELTA   bits 16-23  the probe point's offset into free
 *   MT_CK_FREE_BEFORE  bits 24-43  bytes of the module's text before the probe
 *   MT_CK_FREE_AFTER   bits 44-63  ... and from it on; both clamped, which
 *                                  only lets a far internal call through
 * For mmap, munmap and mremap (called_from_module):
 *   MT_CK_BEFORE       bits 16-39  bytes of the module's text before the probe
 *   MT_CK_AFTER        bits 40-63  ... and from it on; both 0 (also when
 *                                  either does not fit): the test is off
 * For any other:
 *   MT_CK_ALIAS        bit  16     the function has several names of docs/spec.md §3's
 *                                  or an allocator API's (tcmalloc's free is
 *                                  also operator delete and tc_free): the
 *                                  event carries the PLT stub the program
 *                                  called, which the agent names
 * A classic uretprobe link's cookie (mt_return) is none of these: it is the
 * pid the link was made for, in memtrace's PID namespace (tracer/abi.go's
 * retCookie).
 * SIG keeps its 8 bits: with the 4 it needs, clang's code for mt_enter made
 * the verifier explore it past its million instructions. */
#define MT_CK_OP_SHIFT 0
#define MT_CK_OP_BITS 8
#define MT_CK_SIG_SHIFT 8
#define MT_CK_SIG_BITS 8
#define MT_CK_FREE_DELTA_SHIFT 16
#define MT_CK_FREE_DELTA_BITS 8
#define MT_CK_FREE_BEFORE_SHIFT 24
#define MT_CK_FREE_BEFORE_BITS 20
#define MT_CK_FREE_AFTER_SHIFT 44
#define MT_CK_FREE_AFTER_BITS 20
#define MT_CK_BEFORE_SHIFT 16
#define MT_CK_BEFORE_BITS 24
#define MT_CK_AFTER_SHIFT 40
#define MT_CK_AFTER_BITS 24
#define MT_CK_ALIAS_SHIFT 16
#define MT_CK_ALIAS_BITS 1
#define MT_CK(cookie, field) \
	(((cookie) >> MT_CK_##field##_SHIFT) & ((1ULL << MT_CK_##field##_BITS) - 1))

enum mt_sig {
	MT_SIG_SIZE0 = 0,        /* f(size) */
	MT_SIG_CALLOC = 1,       /* f(n, size) */
	MT_SIG_REALLOC = 2,      /* f(ptr, size) */
	MT_SIG_REALLOCARRAY = 3, /* f(ptr, n, size) */
	MT_SIG_ALIGN_SIZE = 4,   /* f(align, size) */
	MT_SIG_POSIX_MEMALIGN = 5, /* f(void **out, align, size) */
	MT_SIG_STRDUP = 6,       /* size is the inner malloc's */
	MT_SIG_MMAP = 7,         /* f(addr, len, prot, flags, fd, off) */
	MT_SIG_MREMAP = 8,       /* f(old, old_len, new_len, flags, ...) */
	MT_SIG_NEW_ALIGNED = 9,  /* f(size, align): like SIZE0 */
	MT_SIG_FREE_CHECKED = 10, /* free: skip the module's direct internal calls */
	MT_SIG_XALLOCX = 11,     /* jemalloc's xallocx(ptr, size, extra, flags): resized in place
				  * when it returns at least size */
};

/* Every ring-buffer record starts with its type in byte 0, and the agent
 * decodes by that byte. 0 is no type, so that a zeroed record is refused. */
enum mt_rec {
	MT_REC_PACKED = 1, /* struct mt_event_packed */
	MT_REC_EVENT = 2,  /* struct mt_event */
	MT_REC_THREAD = 3, /* struct mt_thread */
	MT_REC_STACK = 4,  /* struct mt_stack */
	MT_REC_FILE = 5,   /* struct mt_file */
	MT_REC_REMAP = 6,  /* struct mt_remap */
};

/* An event is sent in one of two forms. Nearly always (no stack, no old
 * pointer, the pointer under 2^48, the size under 2^36 and the flags in
 * MT_PACKED_FLAGS) it is an mt_event_packed of 24 bytes; else the whole
 * mt_event of 56. The ring buffer's cost per record grows with its length,
 * because each record fills fresh cache lines: the 80-byte events of
 * before cost a malloc+free pair about a tenth of the floor more
 * (docs/measurements.md). For the same reason the thread's process and
 * name travel apart, in an mt_thread record sent before the thread's first
 * event and again after each rename. */
struct mt_event {
	__u8 type;      /* MT_REC_EVENT */
	__u8 kind;      /* enum mt_kind */
	__u8 op;        /* enum mt_op */
	__u8 flags;     /* MT_FLAG_* */
	__u32 tid;
	__u64 ts_ns;    /* CLOCK_MONOTONIC */
	__u64 ptr;
	__u64 size;
	__u64 stack;    /* id of a stack sent before in an mt_stack record; 0: none */
	__u64 old_ptr;
	__u64 old_size;
};

struct mt_event_packed {
	__u64 op_ptr;   /* MT_PK_OP_PTR: type, op, ptr */
	__u64 ts_ns;
	__u64 size_tid; /* MT_PK_SIZE_TID: size, kind, flags, tid */
};

/* mt_event_packed's fields, packed only by these macros (the BPF side's
 * send_packed, and tracer/abi_test.go's C program that checks the Go
 * decoder against them); op_ptr's low byte is the record type. */
#define MT_PK_OP_SHIFT 8
#define MT_PK_PTR_SHIFT 16
#define MT_PTR_BITS 48
#define MT_SIZE_BITS 36
#define MT_PK_KIND_SHIFT 36
#define MT_PK_KIND_BITS 3
#define MT_PK_FLAGS_SHIFT 39
#define MT_PACKED_FLAGS 0x7 /* the flags a packed event can carry (3 bits) */
#define MT_PK_TID_SHIFT 42  /* 22 bits: PID_MAX_LIMIT is 2^22 */
#define MT_PK_FITS(ptr, size, flags) \
	((ptr) >> MT_PTR_BITS == 0 && (size) >> MT_SIZE_BITS == 0 && ((flags) & ~MT_PACKED_FLAGS) == 0)
#define MT_PK_OP_PTR(op, ptr) (MT_REC_PACKED | (__u64)(op) << MT_PK_OP_SHIFT | (__u64)(ptr) << MT_PK_PTR_SHIFT)
#define MT_PK_SIZE_TID(size, kind, flags, tid)                                                   \
	((__u64)(size) | (__u64)(kind) << MT_PK_KIND_SHIFT | (__u64)(flags) << MT_PK_FLAGS_SHIFT | \
	 (__u64)(tid) << MT_PK_TID_SHIFT)

/* Who a thread is: it applies to the thread's events that follow it in
 * the ring buffer. */
struct mt_thread {
	__u8 type;      /* MT_REC_THREAD */
	__u32 tgid;
	__u32 tid;
	char comm[16];
};

#define MT_MAX_FRAMES 127

/* A frame as found when its stack was first seen: its file and offset, so
 * that it resolves even after the library is unmapped or the process has
 * exited. ino is 0 for anonymous memory and all ones when the VMA could
 * not be read (the agent then uses its record of the mappings). */
struct mt_frame {
	__u64 addr;
	__u64 fileoff;
	__u64 ino;
};

#define MT_PATH_PARTS 24
#define MT_PART_LEN 64

/* The path of a file that frames lie in, sent once per inode before the
 * first stack that needs it, so that a library dlclose'd (or a process
 * gone) before the agent looks is still found: its components, the file's
 * name first, up to the root across mounts. A component cut at
 * MT_PART_LEN-1 bytes or a path deeper than MT_PATH_PARTS is flagged. */
struct mt_file {
	__u8 type;      /* MT_REC_FILE */
	__u8 truncated;
	__u16 nparts;
	__u64 ino;
	char parts[MT_PATH_PARTS][MT_PART_LEN];
};

/* Sent once per distinct (process, stack): events then carry its id. */
struct mt_stack {
	__u8 type;      /* MT_REC_STACK */
	__u8 reason;    /* enum mt_stop: why the walk ended */
	__u16 nframes;
	__u32 tgid;
	__u64 ts_ns;
	__u64 id;
	struct mt_frame frames[MT_MAX_FRAMES];
};

/* Why a stack walk ended. MT_STOP_FPWALK: the kernel's frame-pointer
 * walk (bpf_get_stack) took the stack and does not say; the agent judges
 * by the frames. */
enum mt_stop {
	MT_STOP_FPWALK = 0,
	MT_STOP_END = 1,      /* the outermost frame: the stack is complete */
	MT_STOP_DEPTH = 2,    /* --stack-depth frames */
	MT_STOP_NO_INFO = 3,  /* a PC with no usable unwind rule and no frame pointer */
	MT_STOP_BAD_READ = 4, /* a stack read failed or gave no frame */
	MT_STOP_FP = 5,       /* the frame-pointer fallback was used and then broke */
};

/* The DWARF walk's tables (built by the unwind package; unwind/row.go is
 * the row ABI): all files' rows in one array, their extended rules in
 * another, and per 4 KiB page of a table's PCs the range of rows that can
 * cover it, so that a lookup is one page read and a binary search over a
 * few rows. */
#define MT_UPAGE_SHIFT 12
#define MT_UMAPS 512 /* executable file mappings of one process */

struct mt_urow {
	__u32 pc;   /* ELF vaddr - the table's base */
	__u16 cfa;
	__u8 info;
	__s8 reg;
};

struct mt_uext {
	__s32 cfa_off;
	__s32 fp_off;
	__s32 ra_off;
	__u8 info;
	__u8 plt;
	__u16 zero;
};

/* Where one file's table lies in the shared arrays. A page entry is the
 * first candidate row | the last << 32, relative to row_first. */
struct mt_utable {
	__u32 row_first;
	__u32 row_count;  /* 0: no table (the frame-pointer fallback applies) */
	__u32 page_first;
	__u32 page_count;
	__u32 ext_first;
	__u32 ext_count;
};

/* One executable file mapping of a process; a process's are sorted by
 * start. base is the runtime address of row PC 0. */
struct mt_umap {
	__u64 start;
	__u64 end;
	__u64 base;
	struct mt_utable t;
};

struct mt_umaps {
	__u32 n;
	/* Which write of the agent's this array is: each write a new
	 * number (a forked child's copy keeps its parent's, with the same
	 * contents), never 0. The walk's replay trusts a kept step's
	 * mapping without searching again when the array is the same. */
	__u32 gen;
	struct mt_umap m[MT_UMAPS];
};

/* A file's table by the VMA's (s_dev, i_ino), for a PC in a mapping the
 * agent has not written yet (a library mapped since, or just after exec):
 * the row PC is pc - vm_start + (vm_pgoff << 12) + delta when the VMA's
 * file offset is within [seg_off, seg_end). */
struct mt_ufile_key {
	__u64 dev;
	__u64 ino;
};

struct mt_ufile {
	struct mt_utable t;
	__u64 seg_off;
	__u64 seg_end;
	__u64 delta;
};

/* Asks the agent to write a process's mappings again: a PC was in a file
 * mapping its array lacks. Sent once until the agent has done so. */
struct mt_remap {
	__u8 type;      /* MT_REC_REMAP */
	__u8 held;      /* 1: the process is held until the agent resumes it
			 * and deletes hold_key from the hold map */
	__u32 tgid;
	__u32 hold_key;
};
/* The hold map's key: the tgid (below 2^22, PID_MAX_LIMIT), the kind of
 * hold at bit 22 and a sequence at bit 24. Each hold has a key of its own,
 * so that the release of one (SIGCONT sent, its entry not yet deleted)
 * never deletes another hold of the same process: a fork's child that
 * execs at once, an exec after an exec, a dlopen after a dlopen. A fork
 * hold's sequence is 0 (a pid is forked once); exec and dlopen holds take
 * theirs from the clock. Fork and exec events carry their key in size. */
#define MT_HOLD_PID_MASK 0x3fffffu
#define MT_HOLD_KIND_SHIFT 22
#define MT_HOLD_FORK 1u
#define MT_HOLD_EXEC 2u
#define MT_HOLD_DL 3u
#define MT_HOLD_SEQ_SHIFT 24
#define MT_HOLD_SEQ_MASK 0xffu
#define MT_HOLD_KEY(tgid, kind, seq) \
	((__u32)(tgid) | (__u32)(kind) << MT_HOLD_KIND_SHIFT | ((__u32)(seq) & MT_HOLD_SEQ_MASK) << MT_HOLD_SEQ_SHIFT)

/* A fork, exec or exit record the ring buffer could not take, queued in the
 * backlog map instead: the records that decide how a process's run ended
 * are never dropped. The agent drains the queue with every read. */
struct mt_backlog {
	struct mt_thread thread;
	struct mt_event ev;
};

/* mt_event.flags */
#define MT_FLAG_FILE 0x1     /* mmap of a file: not logged unless asked */
/* The PLT stub called: old_ptr = its file offset, old_size = its inode; or
 * old_ptr = its address when old_size is all ones. */
#define MT_FLAG_CALLSITE 0x2

#define MT_FLAG_HELD 0x4     /* the process was stopped (SIGSTOP) until the agent attaches */
/* MT_EV_FORK without --follow: the child runs untraced (never in a packed
 * event, whose flags are MT_PACKED_FLAGS). */
#define MT_FLAG_UNFOLLOWED 0x8

#define MT_MAP_ANONYMOUS 0x20
#define MT_SIGSTOP 19
#define MT_SIGCONT 18
#endif
