/* sample_fork: a forked child's frees of the blocks it inherited
 * (TestSampleForkInherited). The parent allocates PARENT_N blocks in
 * parent_site and forks; the child frees every one of them, allocates
 * CHILD_N blocks in child_site and exits; the parent waits for it and
 * exits with its blocks live. Prints "child PID" on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PARENT_N 1000
#define PARENT_SIZE 1000
#define CHILD_N 10
#define CHILD_SIZE 500

static void *blocks[PARENT_N];
static void *kept[CHILD_N];

static void escape(void *p)
{
	__asm__ volatile("" : : "g"(p) : "memory");
}

__attribute__((noinline)) static void *parent_site(size_t n)
{
	void *p = malloc(n);
	escape(p);
	return p;
}

__attribute__((noinline)) static void *child_site(size_t n)
{
	void *p = malloc(n);
	escape(p);
	return p;
}

int main(void)
{
	for (int i = 0; i < PARENT_N; i++)
		blocks[i] = parent_site(PARENT_SIZE);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		for (int i = 0; i < PARENT_N; i++)
			free(blocks[i]);
		for (int i = 0; i < CHILD_N; i++)
			kept[i] = child_site(CHILD_SIZE);
		_exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	printf("child %d\n", (int)pid);
	return 0;
}
