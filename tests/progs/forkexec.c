/* forkexec OUT COUNT INTERVAL_MS: writes OUT.started (its pid), forks COUNT
 * children, one every INTERVAL_MS; each execs this program again as
 * "forkexec OUT -c I", which allocates, fills and frees 1000+I bytes, lives
 * 30 ms and exits with a checksum of what it wrote. The parent waits for
 * each (a child left stopped blocks it for good), writes the sum of their
 * statuses to OUT and exits with 10 + sum % 50: an untraced run's result and
 * status. memtrace --follow holds each child at its fork and again at its
 * exec; the fault tests (tests/faults_rounds_test.go) kill memtrace while
 * this runs. OUT is in every child's command line, which is how the tests
 * find the whole tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static int child(int i)
{
	size_t n = 1000 + (size_t)i;
	unsigned char *b = malloc(n);
	if (!b)
		return 1;
	unsigned s = 0;
	for (size_t j = 0; j < n; j++)
		s += (b[j] = (unsigned char)(j * 7 + (size_t)i));
	free(b);
	nap(30);
	return (int)(s & 0x7f);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[2], "-c") == 0)
		return child(atoi(argv[3]));
	if (argc < 4) {
		fprintf(stderr, "usage: forkexec OUT COUNT INTERVAL_MS\n");
		return 2;
	}
	int count = atoi(argv[2]);
	long interval = atol(argv[3]);
	char started[4096];
	snprintf(started, sizeof started, "%s.started", argv[1]);
	FILE *sf = fopen(started, "w");
	if (!sf)
		return 1;
	fprintf(sf, "%d\n", (int)getpid());
	fclose(sf);
	pid_t *kids = calloc((size_t)count + 1, sizeof(pid_t));
	if (!kids)
		return 1;
	for (int i = 0; i < count; i++) {
		pid_t p = fork();
		if (p == 0) {
			char ib[16];
			snprintf(ib, sizeof ib, "%d", i);
			execl("/proc/self/exe", argv[0], argv[1], "-c", ib, (char *)0);
			_exit(127);
		}
		if (p < 0) {
			perror("fork");
			return 1;
		}
		kids[i] = p;
		nap(interval);
	}
	long sum = 0;
	for (int i = 0; i < count; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st)) {
			fprintf(stderr, "forkexec: child %d did not exit normally\n", i);
			return 1;
		}
		sum += WEXITSTATUS(st) * (i + 1);
	}
	free(kids);
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "sum=%ld\n", sum);
	if (fclose(f) != 0)
		return 1;
	return 10 + (int)(sum % 50);
}
