/* threadstacks: THREADS threads alive at once, each allocating from 128
 * distinct stacks (a 6-level fan of two call sites a level, mallocs and
 * frees), then it prints the process's resident anonymous memory
 * (smaps_rollup, exact, unlike VmRSS's per-thread counts) before the
 * threads started and while they all still live: what a tracer keeps per
 * thread in its own memory shows there. Shared memory (the --preload
 * region, whose chunks a thread takes by what it writes) does not. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 100, LEVELS = 6 };

static pthread_barrier_t started, done;

__attribute__((noinline)) static void fan(unsigned bits, int lvl);

__attribute__((noinline)) static void via_one(unsigned bits, int lvl)
{
	fan(bits, lvl);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void via_zero(unsigned bits, int lvl)
{
	fan(bits, lvl);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void fan(unsigned bits, int lvl)
{
	if (lvl == 0)
		free(malloc(32));
	else if (bits & 1)
		via_one(bits >> 1, lvl - 1);
	else
		via_zero(bits >> 1, lvl - 1);
	__asm__ volatile("" ::: "memory");
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Anonymous:", 10) == 0)
			kb = strtol(line + 10, NULL, 10);
	fclose(f);
	return kb;
}

static void *worker(void *arg)
{
	for (unsigned v = 0; v < (1u << LEVELS); v++)
		fan(v, LEVELS);
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&done);
	return arg;
}

int main(void)
{
	pthread_t t[THREADS];
	pthread_barrier_init(&started, NULL, THREADS + 1);
	pthread_barrier_init(&done, NULL, THREADS + 1);
	long before = rss_kb();
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			return 1;
	pthread_barrier_wait(&started);
	printf("rss %ld %ld\n", before, rss_kb());
	pthread_barrier_wait(&done);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
