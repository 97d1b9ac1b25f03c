// init.c: options (MEMTRACK_* / MEMTRACE_* variables), the constructor that
// picks the mode, the destructor, and small helpers both modes use.
#include "mt.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "shm.h"
#include "text.h"

volatile int g_ready;
volatile int g_off;
volatile int g_exiting;
size_t min_size;
int stack_depth;
int walk_backtrace;
uint32_t stack_ids;
int mmap_files;
int follow = 1;
char stack_threads[256];
char track_threads[256];
volatile unsigned name_gen = 1;
pid_t g_pid;
pthread_key_t exit_key;
uintptr_t self_base;

// Until the constructor picks a mode, calls go to the early buffer.
const mt_sink *mt_out = &early_sink;

size_t parse_size(const char *s, size_t dflt)
{
	if (!s || !*s)
		return dflt;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return dflt;
	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	else if (*end == 'g' || *end == 'G')
		v <<= 30;
	return (size_t)v;
}

static void copy_env(char *dst, size_t n, const char *name)
{
	const char *v = getenv(name);
	dst[0] = 0;
	if (v) {
		strncpy(dst, v, n - 1);
		dst[n - 1] = 0;
	}
}

void err_line(const char *a, const char *b)
{
	char line[512];
	snprintf(line, sizeof line, "memtrace-preload: %s%s\n", a, b);
	ssize_t r = write(2, line, strlen(line));
	(void)r;
}

int name_matches(const char *name, const char *list)
{
	// list is a comma-separated set of substrings; empty = all.
	if (!list[0])
		return 1;
	const char *p = list;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n && memmem(name, strlen(name), p, n))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

void read_comm(char *nm)
{
	memset(nm, 0, 17);
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, nm, 16);
		close(fd);
		if (n > 0 && nm[n - 1] == '\n')
			nm[n - 1] = 0;
	}
}

void read_cmdline(char *dst, size_t n)
{
	dst[0] = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t r = read(fd, dst, n - 1);
	close(fd);
	if (r <= 0)
		return;
	dst[r] = 0;
	for (ssize_t i = 0; i < r; i++)
		if (dst[i] == 0)
			dst[i] = ' ';
	while (r > 0 && dst[r - 1] == ' ')
		dst[--r] = 0;
}

static void init_once(void)
{
	resolve();
	g_pid = getpid();
	{
		Dl_info info;
		if (dladdr((void *)&init_once, &info))
			self_base = (uintptr_t)info.dli_fbase;
	}
	const char *fv = getenv("MEMTRACE_FOLLOW");
	follow = !(fv && strcmp(fv, "0") == 0);
	min_size = parse_size(getenv("MEMTRACK_MIN_SIZE"), 0);
	sample_rate = parse_size(getenv("MEMTRACE_SAMPLE"), 0);
	stack_depth = (int)parse_size(getenv("MEMTRACK_STACK_DEPTH"), 0);
	if (stack_depth > 128)
		stack_depth = 128;
	const char *wv = getenv("MEMTRACE_WALK");
	walk_backtrace = wv && strcmp(wv, "backtrace") == 0;
	stack_ids = (uint32_t)parse_size(getenv("MEMTRACE_STACK_IDS"), MT_STACK_ID_MAX);
	if (stack_ids < 4 || stack_ids > MT_STACK_ID_MAX)
		stack_ids = MT_STACK_ID_MAX;
	copy_env(stack_threads, sizeof stack_threads, "MEMTRACK_STACK_THREADS");
	copy_env(track_threads, sizeof track_threads, "MEMTRACK_TRACK_THREADS");
	const char *mf = getenv("MEMTRACE_MMAP_FILES");
	mmap_files = mf && strcmp(mf, "1") == 0;

	// MEMTRACE_SHM (set by memtrace --preload) asks for the binary mode;
	// without it the library is memtrack's drop-in and writes text.
	int bm = bin_attach();
	if (bm) {
		if (!g_off)
			bin_start(bm == 2);
		return;
	}
	text_start();
}

__attribute__((constructor)) static void init(void)
{
	int in = t_in;
	t_in = 1;
	init_once();
	early_replay();
	t_in = in;
}

__attribute__((destructor)) static void fini(void)
{
	sink()->process_exit();
}
