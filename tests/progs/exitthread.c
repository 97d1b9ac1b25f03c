/* exitthread: the process ends with exit() called from a worker thread
 * while main is blocked, so main never returns; every buffered event must
 * still reach the log. */
#include "truth.h"

static void *worker(void *arg)
{
	truth_setname("exiter");
	for (int i = 0; i < 100; i++) {
		void *p = escape(malloc(64 + (size_t)i));
		truth_rec("malloc", 64 + (size_t)i, p);
		if (i % 2)
			free(p);
		if (i % 2)
			truth_rec("free", 64 + (size_t)i, p);
	}
	truth_write();
	exit(0);
	return arg;
}

int main(void)
{
	truth_init();
	truth_setname("exit-main");
	void *m = escape(malloc(5555));
	truth_rec("malloc", 5555, m);
	pthread_t t;
	truth_gap();
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		truth_die("pthread_create failed\n");
	pthread_join(t, NULL); /* never returns: the worker calls exit */
	return 1;
}
