/* churn N: N threads one after another, each one malloc and one free,
 * joined in turn: a thread-per-request program's pattern (bench-churn.sh). */
#include <pthread.h>
#include <stdlib.h>

static void *worker(void *arg)
{
	void *volatile p = malloc(48);
	free(p);
	return arg;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, 0, worker, 0))
			abort();
		pthread_join(t, 0);
	}
	return 0;
}
