/* forkmt: fork while other threads allocate and free as fast as they can.
 * Neither the parent nor the children may deadlock; each child allocates
 * and leaves with _exit. */
#include "truth.h"
#include <sys/wait.h>

static volatile int stop;

static void *churn(void *arg)
{
	long id = (long)arg;
	char name[16] = "churn-0";
	name[6] = (char)('0' + id);
	truth_setname(name);
	int i = 0;
	while (!stop && i < 5000) {
		size_t n = 24 + (size_t)(i % 50);
		void *p = escape(malloc(n));
		truth_rec("malloc", n, p);
		free(p);
		truth_rec("free", n, p);
		i++;
	}
	truth_exit();
	return arg;
}

int main(void)
{
	truth_init();
	truth_setname("forkmt-main");
	pthread_t t[2];
	for (long i = 0; i < 2; i++) {
		truth_gap();
		if (pthread_create(&t[i], NULL, churn, (void *)i) != 0)
			truth_die("pthread_create failed\n");
	}
	for (int k = 0; k < 5; k++) {
		truth_gap();
		pid_t pid = fork();
		if (pid < 0)
			truth_die("fork failed\n");
		if (pid == 0) {
			truth_forked();
			truth_setname("forkmt-child");
			void *p = escape(malloc(4242));
			truth_rec("malloc", 4242, p);
			free(p);
			truth_rec("free", 4242, p);
			truth_write();
			_exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			truth_die("child failed\n");
	}
	stop = 1;
	for (int i = 0; i < 2; i++) {
		truth_gap();
		pthread_join(t[i], NULL);
	}
	truth_write();
	return 0;
}
