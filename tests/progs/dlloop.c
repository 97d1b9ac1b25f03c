/* dlloop OUT ITERS [THREADS [SLEEP_MS]]: writes OUT.started (its pid), then
 * ITERS times copies libdlalloc.so (next to the program) to OUT.lib, a new
 * inode each time, so that the tracer meets a library it has not seen yet
 * (with --stack-depth, memtrace holds the process at each dlopen while it
 * builds the library's unwind table); dlopens it, allocates and frees
 * through it, dlcloses it and removes the copy, then sleeps SLEEP_MS
 * (default 5). THREADS threads (default 0) allocate and free meanwhile.
 * Writes the checksum of what it computed to OUT and exits with
 * 10 + checksum % 50: an untraced run's result and status, for the fault
 * tests (tests/faults_rounds_test.go) to compare a traced run with. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int iters;
static long sleep_ms = 5;

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *churn(void *arg)
{
	unsigned long id = (unsigned long)arg, sum = 0;
	for (int i = 0; i < iters * 4; i++) {
		size_t n = 16 + (size_t)((i * 37 + id * 11) % 3000);
		unsigned char *p = malloc(n);
		if (!p)
			exit(1);
		for (size_t j = 0; j < n; j += 64)
			p[j] = (unsigned char)(i + j + id);
		for (size_t j = 0; j < n; j += 64)
			sum = sum * 31 + p[j];
		free(p);
		if (i % 4 == 3)
			nap(sleep_ms);
	}
	return (void *)sum;
}

static void die(const char *what)
{
	fprintf(stderr, "dlloop: %s\n", what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dlloop OUT ITERS [THREADS [SLEEP_MS]]\n");
		return 2;
	}
	iters = atoi(argv[2]);
	int nthreads = argc > 3 ? atoi(argv[3]) : 0;
	if (argc > 4)
		sleep_ms = atol(argv[4]);
	char path[PATH_MAX], lib[PATH_MAX], started[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
	if (n <= 0)
		die("readlink /proc/self/exe failed");
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "libdlalloc.so");
	snprintf(lib, sizeof lib, "%s.lib", argv[1]);
	snprintf(started, sizeof started, "%s.started", argv[1]);

	/* The library's bytes, read once: each copy is a new file. */
	FILE *sf = fopen(path, "rb");
	if (!sf)
		die("open libdlalloc.so failed");
	static char image[1 << 20];
	size_t size = fread(image, 1, sizeof image, sf);
	fclose(sf);
	if (size == 0 || size == sizeof image)
		die("read libdlalloc.so failed");

	FILE *st = fopen(started, "w");
	if (!st)
		die("create OUT.started failed");
	fprintf(st, "%d\n", (int)getpid());
	fclose(st);

	pthread_t *tids = calloc((size_t)nthreads + 1, sizeof *tids);
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&tids[t], 0, churn, (void *)(unsigned long)(t + 1)) != 0)
			die("pthread_create failed");

	unsigned long sum = 0;
	for (int i = 0; i < iters; i++) {
		int fd = open(lib, O_WRONLY | O_CREAT | O_TRUNC, 0755);
		if (fd < 0 || write(fd, image, size) != (ssize_t)size || close(fd) != 0)
			die("write the library's copy failed");
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die("dlopen failed");
		void *(*dl_alloc)(size_t) = (void *(*)(size_t))dlsym(h, "dl_alloc");
		void (*dl_free)(void *) = (void (*)(void *))dlsym(h, "dl_free");
		if (!dl_alloc || !dl_free)
			die("dlsym failed");
		size_t len = 100 + (size_t)(i % 50);
		unsigned char *p = dl_alloc(len);
		if (!p)
			die("dl_alloc failed");
		for (size_t j = 0; j < len; j++)
			p[j] = (unsigned char)(i * 3 + j);
		for (size_t j = 0; j < len; j++)
			sum = sum * 131 + p[j];
		dl_free(p);
		if (dlclose(h) != 0)
			die("dlclose failed");
		unlink(lib);
		nap(sleep_ms);
	}
	for (int t = 0; t < nthreads; t++) {
		void *r;
		if (pthread_join(tids[t], &r) != 0)
			die("pthread_join failed");
		sum = sum * 7 + (unsigned long)r;
	}
	free(tids);
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "sum=%lu iters=%d threads=%d\n", sum, iters, nthreads);
	if (fclose(f) != 0)
		return 1;
	return 10 + (int)(sum % 50);
}
