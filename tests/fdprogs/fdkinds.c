/* Opens a descriptor of every kind that memtrace's fd tracking knows,
 * through the raw syscalls (so that the syscall is the one named, whatever
 * libc would pick), closes some, leaks the others, and writes what it did
 * to the file named by $FDTRUTH, one line per descriptor opened or closed:
 *
 *   open CALL FD KIND tid=TID [peer=FD] [old=FD] [cloexec=1] [path=PATH]
 *   close CALL FD tid=TID
 *
 * It writes a byte to stdout and waits for one on stdin before starting,
 * so that the tracer can begin to watch it then. argv[1] is a directory to creat() a file in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

struct open_how_ {
	uint64_t flags, mode, resolve;
};

static int truth = -1;

static void rec(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 32, fmt, ap);
	va_end(ap);
	n += snprintf(buf + n, 32, " tid=%ld\n", (long)syscall(SYS_gettid));
	if (write(truth, buf, n) != n)
		exit(3);
}

static int must(long r, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "fdkinds: %s: %s\n", what, strerror(errno));
		exit(2);
	}
	return (int)r;
}

static void sclose(int fd)
{
	must(syscall(SYS_close, fd), "close");
	rec("close close %d", fd);
}

static void *thread_main(void *arg)
{
	(void)arg;
	int fd = must(syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY), "thread openat");
	rec("open openat %d file path=/etc/hostname", fd);
	sclose(fd);
	fd = must(syscall(SYS_eventfd2, 0, 0), "thread eventfd2");
	rec("open eventfd2 %d eventfd", fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *tf = getenv("FDTRUTH");
	if (!tf || argc < 2) {
		fprintf(stderr, "usage: FDTRUTH=FILE fdkinds DIR\n");
		return 2;
	}
	/* Opened before tracing starts, and never closed: not part of the record. */
	truth = must(open(tf, O_WRONLY | O_CREAT | O_TRUNC, 0644), "truth file");
	/* Ready: the tracer starts watching now, after the loader's opens. */
	char c = 'r';
	if (write(1, &c, 1) != 1 || read(0, &c, 1) != 1)
		return 1;

	int fd, fds[2];
#ifdef SYS_open
	fd = must(syscall(SYS_open, "/etc/hostname", O_RDONLY | O_CLOEXEC), "open");
	rec("open open %d file cloexec=1 path=/etc/hostname", fd);
	sclose(fd);
#endif
	int leaked_file = must(syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY), "openat");
	rec("open openat %d file path=/etc/passwd", leaked_file);

	struct open_how_ how = {.flags = O_RDONLY | O_CLOEXEC};
	fd = must(syscall(SYS_openat2, AT_FDCWD, "/etc/hosts", &how, sizeof(how)), "openat2");
	rec("open openat2 %d file cloexec=1 path=/etc/hosts", fd);
	sclose(fd);

	char path[400];
	snprintf(path, sizeof(path), "%s/created", argv[1]);
#ifdef SYS_creat
	fd = must(syscall(SYS_creat, path, 0600), "creat");
	rec("open creat %d file path=%s", fd, path);
	sclose(fd);
#endif

	/* Failed calls log nothing. */
	if (syscall(SYS_openat, AT_FDCWD, "/nonexistent/fdkinds", O_RDONLY) >= 0 || syscall(SYS_close, 9999) == 0)
		return 4;

	fd = must(syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket");
	rec("open socket %d socket cloexec=1", fd);

	must(syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, fds), "socketpair");
	rec("open socketpair %d socket peer=%d", fds[0], fds[1]);
	rec("open socketpair %d socket peer=%d", fds[1], fds[0]);
	sclose(fds[0]);

	/* A listener with two pending connections, for accept and accept4. */
	int lfd = must(syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0), "listen socket");
	rec("open socket %d socket", lfd);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "memtrace-fdkinds-%d", getpid());
	socklen_t salen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1);
	must(bind(lfd, (struct sockaddr *)&sa, salen), "bind");
	must(listen(lfd, 4), "listen");
	int cl[2];
	for (int i = 0; i < 2; i++) {
		cl[i] = must(syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0), "client socket");
		rec("open socket %d socket", cl[i]);
		must(connect(cl[i], (struct sockaddr *)&sa, salen), "connect");
	}
#ifdef SYS_accept
	fd = must(syscall(SYS_accept, lfd, 0, 0), "accept");
	rec("open accept %d socket", fd);
#endif
	fd = must(syscall(SYS_accept4, lfd, 0, 0, SOCK_CLOEXEC), "accept4");
	rec("open accept4 %d socket cloexec=1", fd);
	sclose(fd);

#ifdef SYS_pipe
	must(syscall(SYS_pipe, fds), "pipe");
	rec("open pipe %d pipe peer=%d", fds[0], fds[1]);
	rec("open pipe %d pipe peer=%d", fds[1], fds[0]);
	sclose(fds[1]);
#endif
	must(syscall(SYS_pipe2, fds, O_CLOEXEC), "pipe2");
	rec("open pipe2 %d pipe peer=%d cloexec=1", fds[0], fds[1]);
	rec("open pipe2 %d pipe peer=%d cloexec=1", fds[1], fds[0]);

	/* dups share the description; dup2 and dup3 onto an open descriptor
	 * close it first. */
	int p0 = fds[0];
	int d1 = must(syscall(SYS_dup, p0), "dup");
	rec("open dup %d pipe old=%d", d1, p0);
#ifdef SYS_dup2
	int d2 = must(syscall(SYS_dup2, p0, fds[1]), "dup2");
	rec("close dup2 %d", d2);
	rec("open dup2 %d pipe old=%d", d2, p0);
	/* dup2(fd, fd) does nothing. */
	must(syscall(SYS_dup2, d2, d2), "dup2 same");
#endif
	int d3 = must(syscall(SYS_dup3, p0, 150, O_CLOEXEC), "dup3");
	rec("open dup3 %d pipe old=%d cloexec=1", d3, p0);
	int d4 = must(syscall(SYS_fcntl, p0, F_DUPFD_CLOEXEC, 160), "fcntl");
	rec("open fcntl %d pipe old=%d cloexec=1", d4, p0);
	if (syscall(SYS_fcntl, p0, F_GETFD) < 0)
		return 5; /* not a dup: nothing logged */

#ifdef SYS_eventfd
	fd = must(syscall(SYS_eventfd, 0), "eventfd");
	rec("open eventfd %d eventfd", fd);
#endif
	fd = must(syscall(SYS_eventfd2, 0, O_CLOEXEC), "eventfd2");
	rec("open eventfd2 %d eventfd cloexec=1", fd);
	sclose(fd);
	fd = must(syscall(SYS_timerfd_create, CLOCK_MONOTONIC, O_CLOEXEC), "timerfd_create");
	rec("open timerfd_create %d timerfd cloexec=1", fd);

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
#ifdef SYS_signalfd
	fd = must(syscall(SYS_signalfd, -1, &mask, 8), "signalfd");
	rec("open signalfd %d signalfd", fd);
#endif
	int sfd = must(syscall(SYS_signalfd4, -1, &mask, 8, O_CLOEXEC), "signalfd4");
	rec("open signalfd4 %d signalfd cloexec=1", sfd);
	/* Changing an existing signalfd's mask makes no descriptor. */
	must(syscall(SYS_signalfd4, sfd, &mask, 8, 0), "signalfd4 update");

	fd = must(syscall(SYS_memfd_create, "fdkinds-memfd", 1 /* MFD_CLOEXEC */), "memfd_create");
	rec("open memfd_create %d memfd cloexec=1 path=fdkinds-memfd", fd);
#ifdef SYS_epoll_create
	fd = must(syscall(SYS_epoll_create, 1), "epoll_create");
	rec("open epoll_create %d epoll", fd);
	sclose(fd);
#endif
	fd = must(syscall(SYS_epoll_create1, O_CLOEXEC), "epoll_create1");
	rec("open epoll_create1 %d epoll cloexec=1", fd);
#ifdef SYS_inotify_init
	fd = must(syscall(SYS_inotify_init), "inotify_init");
	rec("open inotify_init %d inotify", fd);
#endif
	fd = must(syscall(SYS_inotify_init1, O_CLOEXEC), "inotify_init1");
	rec("open inotify_init1 %d inotify cloexec=1", fd);

	/* close_range over 200..210, with gaps: one close per open fd. */
	int hi[] = {200, 203, 204, 209};
	for (int i = 0; i < 4; i++) {
		fd = must(syscall(SYS_dup3, leaked_file, hi[i], 0), "dup3 high");
		rec("open dup3 %d file old=%d path=/etc/passwd", fd, leaked_file);
	}
	/* CLOSE_RANGE_CLOEXEC only marks them. */
	must(syscall(SYS_close_range, 200, 210, 4), "close_range cloexec");
	must(syscall(SYS_close_range, 200, 210, 0), "close_range");
	for (int i = 0; i < 4; i++)
		rec("close close_range %d", hi[i]);

	pthread_t th;
	if (pthread_create(&th, 0, thread_main, 0) || pthread_join(th, 0))
		return 6;
	rec("end");
	return 0;
}
