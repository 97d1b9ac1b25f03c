/* The built-in demo: a small "service" with two worker threads that cache
 * requests and leak some of them, so that the demo log has something to
 * show (leaks, threads, call sites, a realloc chain, an mmap). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) static char *parse_request(int i)
{
	char *req = malloc(64 + i % 32);
	snprintf(req, 64, "GET /item/%d", i);
	return req;
}

__attribute__((noinline)) static void handle(int i, char **cache)
{
	char *req = parse_request(i);
	char *copy = strdup(req);
	free(req);
	if (i % 10 == 0)
		cache[i / 10] = copy; /* cached forever: a leak */
	else
		free(copy);
}

static void *worker(void *arg)
{
	pthread_setname_np(pthread_self(), (const char *)arg);
	char **cache = calloc(100, sizeof(char *));
	for (int i = 0; i < 500; i++) {
		handle(i, cache);
		if (i % 100 == 0)
			usleep(1000);
	}
	return cache;
}

int main(void)
{
	pthread_t a, b;
	pthread_create(&a, NULL, worker, "worker-1");
	pthread_create(&b, NULL, worker, "worker-2");
	void *ra, *rb;
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	free(rb); /* worker-2's cache array is freed, its strings are not */
	char *buf = NULL;
	for (int n = 16; n <= 4096; n *= 4)
		buf = realloc(buf, n);
	free(buf);
	void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(m, 1 << 20);
	printf("demo: done\n");
	return 0;
}
