/* fdtrack event ABI: the one definition shared by bpf/fdtrack.bpf.c and the
 * Go package fdtrace (fdtrace/abi.go mirrors it; fdtrace/abi_test.go checks
 * sizes, offsets and enum values against the BTF of the compiled object, so
 * a change here that is not made there fails the tests).
 */
#ifndef FDTRACK_H
#define FDTRACK_H

/* What a syscall does with descriptors. The Go side fills the calls map
 * (syscall number -> fd_call) per architecture and per --track, so the
 * kernel side needs no syscall numbers and traces only what was asked. */
enum fd_call {
	FD_CALL_NONE = 0,
	FD_CALL_OPEN = 1,          /* open(path, flags, mode) */
	FD_CALL_OPENAT = 2,        /* openat(dirfd, path, flags, mode) */
	FD_CALL_OPENAT2 = 3,       /* openat2(dirfd, path, how, size) */
	FD_CALL_CREAT = 4,         /* creat(path, mode) */
	FD_CALL_SOCKET = 5,        /* socket(domain, type, proto) */
	FD_CALL_SOCKETPAIR = 6,    /* socketpair(domain, type, proto, sv[2]) */
	FD_CALL_ACCEPT = 7,        /* accept(fd, addr, len) */
	FD_CALL_ACCEPT4 = 8,       /* accept4(fd, addr, len, flags) */
	FD_CALL_PIPE = 9,          /* pipe(fds[2]) */
	FD_CALL_PIPE2 = 10,        /* pipe2(fds[2], flags) */
	FD_CALL_DUP = 11,          /* dup(old) */
	FD_CALL_DUP2 = 12,         /* dup2(old, new) */
	FD_CALL_DUP3 = 13,         /* dup3(old, new, flags) */
	FD_CALL_FCNTL = 14,        /* fcntl(old, F_DUPFD[_CLOEXEC], min) */
	FD_CALL_EVENTFD = 15,      /* eventfd(count) */
	FD_CALL_EVENTFD2 = 16,     /* eventfd2(count, flags) */
	FD_CALL_TIMERFD_CREATE = 17, /* timerfd_create(clock, flags) */
	FD_CALL_SIGNALFD = 18,     /* signalfd(fd, mask, size) */
	FD_CALL_SIGNALFD4 = 19,    /* signalfd4(fd, mask, size, flags) */
	FD_CALL_MEMFD_CREATE = 20, /* memfd_create(name, flags) */
	FD_CALL_EPOLL_CREATE = 21, /* epoll_create(size) */
	FD_CALL_EPOLL_CREATE1 = 22, /* epoll_create1(flags) */
	FD_CALL_INOTIFY_INIT = 23, /* inotify_init() */
	FD_CALL_INOTIFY_INIT1 = 24, /* inotify_init1(flags) */
	FD_CALL_CLOSE = 25,        /* close(fd) */
	FD_CALL_CLOSE_RANGE = 26,  /* close_range(first, last, flags) */
	FD_CALL_IOCTL = 27,        /* ioctl(fd, cmd, arg): dma-heap and ION */
	FD_CALL_MAX = 28,
};

enum fd_type {
	FD_EV_OPEN = 1,        /* fd (and fd2: socketpair/pipe peer, dup source) */
	FD_EV_CLOSE = 2,       /* fd */
	FD_EV_CLOSE_RANGE = 3, /* fd .. fd2 (as unsigned), flags */
	FD_EV_DMABUF_ALLOC = 4, /* fd = buffer fd, fd2 = heap device fd, size,
				 * flags = fd_flags, extra = heap_flags, path = heap */
	FD_EV_ION_ALLOC = 5,   /* 4.12+ layout: fd = buffer fd, fd2 = device fd,
				* size, aux = heap_id_mask, flags */
	FD_EV_ION_LEGACY_ALLOC = 6, /* fd = handle, fd2 = device fd, size,
				     * aux = heap_id_mask, flags, extra = align */
	FD_EV_ION_FREE = 7,    /* legacy ION_IOC_FREE: fd = handle, fd2 = device fd */
};

/* ioctl numbers: _IOWR(type, nr, size) = 3 << 30 | size << 16 | type << 8 | nr */
#define FD_DMA_HEAP_IOCTL_ALLOC 0xC0184800u   /* _IOWR('H', 0, 24) */
#define FD_ION_IOC_ALLOC 0xC0184900u          /* _IOWR('I', 0, 24): 4.12+ */
#define FD_ION_IOC_ALLOC_LEGACY 0xC0204900u   /* _IOWR('I', 0, 32): <= 4.11, 64-bit */
#define FD_ION_IOC_FREE 0xC0044901u           /* _IOWR('I', 1, 4): legacy */

#define FD_PATH_LEN 256

struct fd_event {
	__u64 ts_ns;  /* CLOCK_MONOTONIC; a close's is taken at entry, before
		       * the number can be reused, an open's at exit */
	__u64 size;   /* dma-buf / ION bytes */
	__u64 flags;  /* open flags, socket type, pipe2/dup3/... flags, close_range flags */
	__u64 extra;  /* dma-heap heap_flags, legacy ION align */
	__u32 tgid;
	__u32 tid;
	__s32 fd;
	__s32 fd2;    /* -1 when unused */
	__u32 aux;    /* socket domain; ION heap_id_mask */
	__u16 call;   /* enum fd_call */
	__u8 type;    /* enum fd_type */
	__u8 trunc;   /* path did not fit */
	char comm[16];
	char path[FD_PATH_LEN]; /* open*, creat: path; memfd_create: name; ioctl: device name */
	/* --stack-depth: the id of the user stack at the call, sent as an
	 * mt_stack record through memtrace's own ring (bpf/memtrace.h), as
	 * an allocation's is; 0: none. */
	__u64 stack;
};

#endif
