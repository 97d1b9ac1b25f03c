/* fork: a child forked from a single-threaded parent allocates, leaks and
 * leaves with _exit (so without returning from main and without exit
 * handlers); the parent frees a block the child inherited a copy of. */
#include "truth.h"
#include <sys/wait.h>

int main(void)
{
	truth_init();
	truth_setname("fork-parent");
	void *before = escape(malloc(1000));
	truth_rec("malloc", 1000, before);

	truth_gap();
	pid_t pid = fork();
	if (pid < 0)
		truth_die("fork failed\n");
	if (pid == 0) {
		truth_forked();
		truth_setname("fork-child");
		void *c1 = escape(malloc(2001));
		truth_rec("malloc", 2001, c1);
		char *c2 = escape(strdup("child"));
		truth_rec("strdup", 6, c2);
		free(c1);
		truth_rec("free", 2001, c1);
		/* its copy of the parent's block: a free of a block the child
		 * inherited */
		free(before);
		truth_rec("free", 1000, before);
		truth_write();
		_exit(0); /* c2 leaks */
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		truth_die("child failed\n");
	void *after = escape(malloc(3000));
	truth_rec("malloc", 3000, after);
	free(before);
	truth_rec("free", 1000, before);
	free(after);
	truth_rec("free", 3000, after);
	truth_write();
	return 0;
}
