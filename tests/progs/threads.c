/* threads: several named threads, a renamed thread, cross-thread frees
 * (T15), a thread that exits before main frees its block (T16), four
 * workers using every C allocation function (T17), EXIT lines. */
#include "truth.h"
#include <malloc.h>
#include <semaphore.h>

static sem_t go_free, allocated;
static void *shared_block;    /* T15: allocated by a live thread, freed by main */
static void *orphan_block;    /* T16: its thread exits, main frees it */

static void create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	truth_gap(); /* pthread_create allocates the thread's TLS */
	if (pthread_create(t, NULL, fn, arg) != 0)
		truth_die("pthread_create failed\n");
}

static void join(pthread_t t)
{
	truth_gap();
	if (pthread_join(t, NULL) != 0)
		truth_die("pthread_join failed\n");
}

static void *t15(void *arg)
{
	truth_setname("t15-alloc");
	shared_block = escape(malloc(1515));
	truth_rec("malloc", 1515, shared_block);
	sem_post(&allocated);
	sem_wait(&go_free); /* stays alive while main frees the block */
	truth_exit();
	return arg;
}

static void *t16(void *arg)
{
	truth_setname("t16-orphan");
	orphan_block = escape(calloc(4, 404));
	truth_rec("calloc", 1616, orphan_block);
	truth_exit();
	return arg;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	char name[16] = "worker-0";
	name[7] = (char)('0' + id);
	truth_setname(name);
	for (int i = 0; i < 50; i++) {
		size_t n = 16 + (size_t)id * 100 + (size_t)i;
		char *a = escape(malloc(n));
		truth_rec("malloc", n, a);
		char *b = escape(calloc(2, n));
		truth_rec("calloc", 2 * n, b);
		char *c = escape(realloc(a, 3 * n));
		truth_rec("free", n, a);
		truth_rec("realloc", 3 * n, c);
		char *d = escape(strdup(name));
		truth_rec("strdup", strlen(name) + 1, d);
		void *e = NULL;
		if (posix_memalign(&e, 32, n) != 0)
			truth_die("posix_memalign failed\n");
		truth_rec("posix_memalign", n, escape(e));
		void *f = escape(memalign(64, n));
		truth_rec("memalign", n, f);
		free(b);
		truth_rec("free", 2 * n, b);
		free(c);
		truth_rec("free", 3 * n, c);
		free(d);
		truth_rec("free", strlen(name) + 1, d);
		free(e);
		truth_rec("free", n, e);
		free(f);
		truth_rec("free", n, f);
	}
	truth_exit();
	return arg;
}

static void *renamed(void *arg)
{
	truth_setname("before-rename");
	void *a = escape(malloc(111));
	truth_rec("malloc", 111, a);
	truth_setname("after-rename");
	void *b = escape(malloc(222));
	truth_rec("malloc", 222, b);
	free(a);
	truth_rec("free", 111, a);
	free(b);
	truth_rec("free", 222, b);
	truth_exit();
	return arg;
}

int main(void)
{
	truth_init();
	truth_setname("threads-main");
	sem_init(&go_free, 0, 0);
	sem_init(&allocated, 0, 0);
	pthread_t a, b, r, w[4];

	/* T15 cross-thread free while the allocating thread is alive */
	create(&a, t15, NULL);
	sem_wait(&allocated);
	free(shared_block);
	truth_rec("free", 1515, shared_block);
	sem_post(&go_free);
	join(a);

	/* T16 the allocating thread exits, main frees afterwards */
	create(&b, t16, NULL);
	join(b);
	free(orphan_block);
	truth_rec("free", 1616, orphan_block);

	/* a thread renamed between two allocations */
	create(&r, renamed, NULL);
	join(r);

	/* T17 four workers, every C allocation function, all freed */
	for (long i = 0; i < 4; i++)
		create(&w[i], worker, (void *)i);
	for (int i = 0; i < 4; i++)
		join(w[i]);

	void *last = escape(malloc(99));
	truth_rec("malloc", 99, last);
	free(last);
	truth_rec("free", 99, last);
	truth_write();
	return 0;
}
