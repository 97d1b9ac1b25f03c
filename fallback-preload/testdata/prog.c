/* prog: the preload package's test program; argv[1] picks a scenario. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

void __attribute__((noinline)) leaf(int n)
{
	sink = malloc((size_t)n);
	free(sink);
}

void __attribute__((noinline)) middle(int n)
{
	leaf(n);
	sink = (void *)1;
}

static void *named(void *arg)
{
	pthread_setname_np(pthread_self(), (const char *)arg);
	for (int i = 0; i < 20; i++) {
		sink = malloc(10 + (size_t)i * 20);
		free(sink);
	}
	return NULL;
}

static pthread_barrier_t idle_b;

static void *idler(void *arg)
{
	sink = malloc(4242);
	free(sink);
	pthread_barrier_wait(&idle_b);
	usleep(1000000); /* alive, each holding its chunk, writing nothing */
	return arg;
}

static void *one(void *arg)
{
	sink = malloc(3131);
	free(sink);
	return arg;
}

static void *churn(void *arg)
{
	for (int i = 0; i < 300000; i++) {
		void *volatile p = malloc(7777);
		free(p);
	}
	return arg;
}

static void *volatile crowd_slot;
static int crowd_n = 20000;
static pthread_barrier_t crowd_b;

static void *crowder(void *arg)
{
	pthread_barrier_wait(&crowd_b);
	for (int i = 0; i < crowd_n; i++) {
		/* Each block is freed by whichever thread takes it next, and
		   its memory comes back to that thread's next malloc: a
		   pointer goes from thread to thread. */
		void *q = __atomic_exchange_n(&crowd_slot, malloc(5555), __ATOMIC_ACQ_REL);
		free(q);
	}
	return arg;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "fmt";
	if (!strcmp(m, "fmt")) {
		pthread_setname_np(pthread_self(), "a (b) c\t");
		middle(100);
		sink = calloc(3, 5);
		sink = realloc(sink, 1000);
		free(sink);
		void *p = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, 8192);
		pthread_t t;
		pthread_create(&t, NULL, named, "worker");
		pthread_join(t, NULL);
		return 0;
	}
	if (!strcmp(m, "exit3")) {
		sink = malloc(5);
		return 3;
	}
	if (!strcmp(m, "kill")) {
		sink = malloc(5);
		kill(getpid(), SIGKILL);
	}
	if (!strcmp(m, "threads")) {
		pthread_t t[3];
		const char *names[3] = {"keep-1", "drop-1", "keep-2"};
		for (int i = 0; i < 3; i++) {
			pthread_create(&t[i], NULL, named, (void *)names[i]);
			pthread_join(t[i], NULL);
		}
		return 0;
	}
	if (!strcmp(m, "serial")) {
		/* 2000 threads one after another, each one malloc and free,
		   and a fork whose child the library does not follow */
		for (int i = 0; i < 2000; i++) {
			pthread_t t;
			pthread_create(&t, NULL, one, NULL);
			pthread_join(t, NULL);
		}
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		waitpid(c, NULL, 0);
		usleep(300000); /* memtrace's sweeps find the last threads gone */
		return 0;
	}
	if (!strcmp(m, "crowd")) {
		/* argv[2] threads alive at once, passing blocks around */
		int n = argc > 2 ? atoi(argv[2]) : 14;
		if (argc > 3)
			crowd_n = atoi(argv[3]);
		pthread_t t[256];
		if (n < 1 || n > 256)
			return 2;
		pthread_barrier_init(&crowd_b, NULL, (unsigned)n);
		for (int i = 0; i < n; i++)
			pthread_create(&t[i], NULL, crowder, NULL);
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		free(crowd_slot);
		return 0;
	}
	if (!strcmp(m, "idle")) {
		/* 15 threads alive and quiet for a second */
		pthread_t t[15];
		pthread_barrier_init(&idle_b, NULL, 15);
		for (int i = 0; i < 15; i++)
			pthread_create(&t[i], NULL, idler, NULL);
		for (int i = 0; i < 15; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	if (!strcmp(m, "spam")) {
		/* many events to a pipe whose reader goes away */
		for (int i = 0; i < 200000; i++) {
			sink = malloc(32);
			free(sink);
		}
		write(1, "done\n", 5);
		return 0;
	}
	if (!strcmp(m, "stall")) {
		/* 200000 pairs of 32 bytes while nobody converts (they fill
		 * the region, the thread waits for the heartbeat in vain and
		 * drops the rest), "stalled", then, once stdin says memtrace
		 * is back, 200000 pairs of 48 bytes, which wait for room
		 * again. */
		for (int i = 0; i < 200000; i++) {
			sink = malloc(32);
			free(sink);
		}
		write(1, "stalled\n", 8);
		char c;
		if (read(0, &c, 1) != 1)
			return 4;
		/* A thread that dropped tries a chunk again only 10 ms later
		 * (shm.c, bin_room's retry_at): what it writes before is
		 * dropped whoever is back. */
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
		for (int i = 0; i < 200000; i++) {
			sink = malloc(48);
			free(sink);
		}
		return 0;
	}
	if (!strcmp(m, "detach")) {
		/* 100 logged pairs, "ready", then, once stdin says so (after
		 * memtrace detached), heavy work in this thread, a second
		 * thread and a forked child: none of it may be logged, and
		 * none of it may block. */
		for (int i = 0; i < 100; i++) {
			sink = malloc(1111);
			free(sink);
		}
		write(1, "ready\n", 6);
		char c;
		if (read(0, &c, 1) != 1)
			return 4;
		pthread_t t;
		pthread_create(&t, NULL, churn, NULL);
		pid_t child = fork();
		if (child == 0) {
			churn(NULL);
			_exit(0);
		}
		churn(NULL);
		pthread_join(t, NULL);
		int st = 0;
		if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 5;
		write(1, "done\n", 5);
		return 0;
	}
	if (!strcmp(m, "exec")) {
		sink = malloc(4321);
		execl(argv[0], argv[0], "exit3", (char *)NULL);
		return 1;
	}
	return 2;
}
