// tcp.c: the text mode's TCP server (MEMTRACK_PORT): wait at start-up for
// one viewer and stream the log to it. memtrack listened on every address;
// this listens on 127.0.0.1 unless MEMTRACE_LISTEN names another (numeric)
// address. Under memtrace the Go side serves the viewer instead.
#include "text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

// open_listen waits for one viewer on HOST:PORT and returns the connection.
int open_listen(const char *port_s)
{
	char host[128] = "127.0.0.1";
	int port = atoi(port_s);
	const char *lis = getenv("MEMTRACE_LISTEN");
	if (lis && *lis) {
		const char *c = strrchr(lis, ':');
		if (c) {
			size_t hl = (size_t)(c - lis);
			if (hl >= sizeof host)
				hl = sizeof host - 1;
			memcpy(host, lis, hl);
			host[hl] = 0;
			if (c[1])
				port = atoi(c + 1);
		} else {
			strncpy(host, lis, sizeof host - 1);
		}
		if (host[0] == '[') { // [::1]
			memmove(host, host + 1, strlen(host));
			char *rb = strchr(host, ']');
			if (rb)
				*rb = 0;
		}
		if (!host[0])
			strcpy(host, "0.0.0.0");
	}
	if (port <= 0 || port > 65535) {
		err_line("bad MEMTRACK_PORT: ", port_s);
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		sl = sizeof *a4;
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		sl = sizeof *a6;
	} else {
		err_line("MEMTRACE_LISTEN needs a numeric address, got: ", host);
		return -1;
	}
	int ls = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0)
		return -1;
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&ss, sl) < 0 || listen(ls, 1) < 0) {
		err_line("cannot listen on the address (in use?): ", host);
		close(ls);
		return -1;
	}
	char msg[200];
	snprintf(msg, sizeof msg, "[memtrace] notice msg=\"waiting for a viewer on %s:%d\"\n", host, port);
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
	int c;
	do {
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	} while (c < 0 && errno == EINTR);
	close(ls);
	return c;
}
