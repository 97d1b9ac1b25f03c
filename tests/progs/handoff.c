/* handoff: more threads than CPUs pass blocks from thread to thread: each
 * allocates a block, puts it in a shared slot and frees the block it took
 * out, whose memory its next allocation gets again. A free follows its
 * block's allocation on another thread by a few instructions, and threads
 * are preempted everywhere, in the tracer's hooks too: the log must still
 * have every free after its block's allocation (else a free of an unknown
 * block, size 0, and a leak that is not one). */
#include "truth.h"

#define THREADS 8
#define ROUNDS 3000
#define SIZE 5555

static void *volatile slot;
static pthread_barrier_t start;

static void *passer(void *arg)
{
	long id = (long)arg;
	char name[16] = "passer-0";
	name[7] = (char)('0' + id);
	truth_setname(name);
	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		void *p = escape(malloc(SIZE));
		truth_rec("malloc", SIZE, p);
		void *q = __atomic_exchange_n(&slot, p, __ATOMIC_ACQ_REL);
		if (q) {
			free(q);
			truth_rec("free", SIZE, q);
		}
	}
	truth_exit();
	return arg;
}

int main(void)
{
	truth_init();
	truth_setname("handoff-main");
	pthread_t t[THREADS];
	pthread_barrier_init(&start, NULL, THREADS);
	for (long i = 0; i < THREADS; i++) {
		truth_gap(); /* pthread_create allocates the thread's TLS */
		if (pthread_create(&t[i], NULL, passer, (void *)i) != 0)
			truth_die("pthread_create failed\n");
	}
	for (int i = 0; i < THREADS; i++) {
		truth_gap();
		if (pthread_join(t[i], NULL) != 0)
			truth_die("pthread_join failed\n");
	}
	void *q = slot;
	free(q);
	truth_rec("free", SIZE, q);
	truth_write();
	return 0;
}
