/* forkstress: forks while other threads allocate (TestPreloadForkWhileWalking).
 * THREADS threads malloc and free without pause; the main thread forks
 * FORKS times, each child allocates once (so that it takes a stack) and
 * exits, and the parent waits for it with a deadline. A child that does
 * not exit within it is one left waiting for a lock a thread held at the
 * fork: the program says so and exits 2. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define FORKS 100

static volatile int stop;

static void escape(void *p)
{
	__asm__ volatile("" : : "g"(p) : "memory");
}

static void *churn(void *arg)
{
	(void)arg;
	while (!stop) {
		void *p = malloc(64);
		escape(p);
		free(p);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, churn, NULL);
	for (int i = 0; i < FORKS; i++) {
		pid_t c = fork();
		if (c < 0)
			return 1;
		if (c == 0) {
			void *p = malloc(32);
			escape(p);
			free(p);
			_exit(0);
		}
		int status = 0;
		struct timespec start, now;
		clock_gettime(CLOCK_MONOTONIC, &start);
		for (;;) {
			pid_t w = waitpid(c, &status, WNOHANG);
			if (w == c)
				break;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec > 20) {
				fprintf(stderr, "forkstress: child %d of fork %d did not exit within 20 s\n", (int)c,
					i);
				kill(c, SIGKILL);
				waitpid(c, &status, 0);
				stop = 1;
				return 2;
			}
			usleep(1000);
		}
	}
	stop = 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	printf("forkstress %d forks\n", FORKS);
	return 0;
}
