// text_session.c: the text mode's output: MEMTRACK_OUTPUT, MEMTRACK_PORT
// (tcp.c) or stderr, shared with exec'd children through the session
// variable, and the header line.
#include "text.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

// The session variable lets exec'd children append to the same output
// with the same time axis: "fd:dev:ino:epoch_ns:follow:mult".
#define SESSION_ENV "MEMTRACE_PRELOAD_SESSION"

int join_session(void)
{
	const char *s = getenv(SESSION_ENV);
	if (!s)
		return 0;
	int fd;
	unsigned long long dev, ino, ep;
	int fl;
	unsigned long long mult = 0;
	if (sscanf(s, "%d:%llu:%llu:%llu:%d:%llu", &fd, &dev, &ino, &ep, &fl, &mult) < 5)
		return 0;
	inherited_mult = mult;
	if (!fl) {
		g_off = 1;
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino) {
		// The fd was closed or reused: do not write into someone
		// else's file. A named output can still be appended to.
		const char *path = getenv("MEMTRACK_OUTPUT");
		if (path && *path && !getenv("MEMTRACK_PORT"))
			fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		else
			fd = -1;
		if (fd < 0) {
			g_off = 1;
			return 1;
		}
	}
	out_fd = fd;
	out_is_sock = S_ISSOCK(st.st_mode);
	epoch_ns = ep;
	return 1;
}

void start_session(void)
{
	const char *port = getenv("MEMTRACK_PORT");
	const char *path = getenv("MEMTRACK_OUTPUT");
	int fd = 2;
	if (port && *port) {
		fd = open_listen(port);
		if (fd < 0) {
			g_off = 1;
			return;
		}
		out_is_sock = 1;
	} else if (path && *path) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			err_line("cannot open MEMTRACK_OUTPUT (check the directory and permissions): ", path);
			g_off = 1;
			return;
		}
	}
	if (fd != 2) {
		// Move the output out of the way of the program's own fds.
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	out_fd = fd;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		g_off = 1;
		return;
	}
	out_is_sock = S_ISSOCK(st.st_mode);
	if (follow && fd != 2) {
		// Exec'd children inherit the output fd.
		int fl = fcntl(fd, F_GETFD);
		fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
	}
	char v[160];
	snprintf(v, sizeof v, "%d:%llu:%llu:%llu:%d:%llu", fd, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, (unsigned long long)epoch_ns, follow,
		 (unsigned long long)(use_counter ? cnt_mult : 0));
	setenv(SESSION_ENV, v, 1);
}

// The first line, in logfmt's order: AppendHeader's (version pid comm cmd
// start mode), or for an exec'd child AppendProc's (event pid ppid ts comm
// cmd, which leaves out an empty comm or cmd).
void write_start_line(int exec_child)
{
	char line[2048], *o = line, *end = line + sizeof line - 96;
	char comm[17], cmd[1024];
	read_comm(comm);
	read_cmdline(cmd, sizeof cmd);
	if (exec_child) {
		o = PUT_LIT(o, "[memtrace] proc event=exec ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = kv_u(o, "ppid", (uint64_t)getppid());
		o = kv_u(o, "ts", now_us());
		o--; // kv_u's space
		if (comm[0]) {
			o = PUT_LIT(o, " comm=");
			o = put_meta_val(o, end, comm);
		}
		if (cmd[0]) {
			o = PUT_LIT(o, " cmd=");
			o = put_meta_val(o, end, cmd);
		}
	} else {
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		o = PUT_LIT(o, "[memtrace] header version=" VERSION " ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = PUT_LIT(o, "comm=");
		o = put_meta_val(o, end, comm);
		o = PUT_LIT(o, " cmd=");
		o = put_meta_val(o, end, cmd);
		o = PUT_LIT(o, " start=");
		o = put_start(o, &rt);
		o = PUT_LIT(o, " mode=preload");
	}
	*o++ = '\n';
	out_write_locked(line, (size_t)(o - line));
}
