/* pidns: the program of the PID namespace tests (tests/pidns_test.go,
 * issue 31): leaks 30 bytes, forks a child that allocates and frees 100
 * blocks, waits for it and exits with status 3. Its records name its
 * threads by the ids of the namespace it runs in. */
#include "truth.h"
#include <sys/wait.h>

int main(void)
{
	truth_init();
	void *leak = escape(malloc(30));
	truth_rec("malloc", 30, leak);

	truth_gap();
	pid_t pid = fork();
	if (pid < 0)
		truth_die("fork failed\n");
	if (pid == 0) {
		truth_forked();
		for (int i = 0; i < 100; i++) {
			void *p = escape(malloc(100 + i));
			truth_rec("malloc", 100 + i, p);
			free(p);
			truth_rec("free", 100 + i, p);
		}
		truth_write();
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		truth_die("child failed\n");
	truth_write();
	return 3;
}
