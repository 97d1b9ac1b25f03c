/* forker OUT COUNT INTERVAL_MS [CHILD_SLEEP_MS [LINGER_MS]]: writes OUT.started,
 * forks COUNT children,
 * one every INTERVAL_MS; each allocates 1000+i bytes, fills and frees them,
 * and exits with a checksum of what it wrote. The parent waits for each
 * (a child left stopped blocks it for good) and writes the sum of the
 * children's statuses to OUT: an untraced run's number. With LINGER_MS it
 * writes OUT.reaped once every child is reaped, then waits that long. Used by the fault
 * tests, which SIGKILL memtrace while this runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: forker OUT COUNT INTERVAL_MS [CHILD_SLEEP_MS]\n");
		return 2;
	}
	int count = atoi(argv[2]);
	long interval = atol(argv[3]), child_sleep = argc > 4 ? atol(argv[4]) : 0;
	long linger = argc > 5 ? atol(argv[5]) : 0;
	char started[4096];
	snprintf(started, sizeof started, "%s.started", argv[1]);
	FILE *sf = fopen(started, "w");
	if (sf) {
		fprintf(sf, "%d\n", (int)getpid());
		fclose(sf);
	}
	long sum = 0;
	pid_t *kids = calloc(count, sizeof(pid_t));
	for (int i = 0; i < count; i++) {
		pid_t p = fork();
		if (p == 0) {
			size_t n = 1000 + i;
			unsigned char *b = malloc(n);
			unsigned s = 0;
			for (size_t j = 0; j < n; j++)
				s += (b[j] = (unsigned char)(j * 7 + i));
			free(b);
			if (child_sleep)
				sleep_ms(child_sleep);
			_exit(s & 0x7f);
		}
		if (p < 0) {
			perror("fork");
			return 1;
		}
		kids[i] = p;
		sleep_ms(interval);
	}
	for (int i = 0; i < count; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st)) {
			fprintf(stderr, "child %d did not exit normally\n", i);
			return 1;
		}
		sum += WEXITSTATUS(st) * (i + 1);
	}
	if (linger) {
		/* OUT.reaped: every child is gone, the lingering starts. */
		snprintf(started, sizeof started, "%s.reaped", argv[1]);
		FILE *rf = fopen(started, "w");
		if (rf)
			fclose(rf);
		sleep_ms(linger);
	}
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "sum=%ld\n", sum);
	return fclose(f) != 0;
}
