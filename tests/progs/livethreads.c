/* livethreads: LIVE threads alive at once, each with a block of its own
 * held across a barrier, then freed with a second block: more live threads
 * than the --preload region once had chunks, each of which a live thread
 * holds (docs/preload.md, "Many threads"). $LIVETHREADS, when set, is a
 * smaller count (under qemu-user, where a thread's start is slow). */
#include "truth.h"
#include <limits.h>

enum { LIVE = 2000 };

static pthread_barrier_t all_alive;

static void *worker(void *arg)
{
	size_t n = 40 + (size_t)(long)arg % 64;
	void *p = escape(malloc(n));
	truth_rec("malloc", n, p);
	pthread_barrier_wait(&all_alive);
	free(p);
	truth_rec("free", n, p);
	void *q = escape(calloc(3, 8));
	truth_rec("calloc", 24, q);
	free(q);
	truth_rec("free", 24, q);
	truth_exit();
	return arg;
}

int main(void)
{
	truth_init();
	static pthread_t t[LIVE];
	int live = LIVE;
	const char *e = getenv("LIVETHREADS");
	if (e && *e) {
		live = atoi(e);
		if (live < 1 || live > LIVE)
			truth_die("LIVETHREADS: want 1 to 2000\n");
	}
	/* Small stacks, at least the target's minimum (128 KiB on arm64). */
	size_t stack = 64 << 10;
	if ((size_t)PTHREAD_STACK_MIN > stack)
		stack = (size_t)PTHREAD_STACK_MIN;
	pthread_attr_t at;
	if (pthread_barrier_init(&all_alive, NULL, (unsigned)live) != 0 || pthread_attr_init(&at) != 0 ||
	    pthread_attr_setstacksize(&at, stack) != 0)
		truth_die("barrier or attributes failed\n");
	for (long i = 0; i < live; i++) {
		truth_gap(); /* pthread_create allocates the thread's TLS */
		if (pthread_create(&t[i], &at, worker, (void *)i) != 0)
			truth_die("pthread_create failed\n");
	}
	for (int i = 0; i < live; i++) {
		truth_gap();
		if (pthread_join(t[i], NULL) != 0)
			truth_die("pthread_join failed\n");
	}
	void *last = escape(malloc(77));
	truth_rec("malloc", 77, last);
	free(last);
	truth_rec("free", 77, last);
	truth_write();
	return 0;
}
