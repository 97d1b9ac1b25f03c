/* reexec OUT N ACC: writes OUT.started, does some allocation work, then re-execs itself with
 * N-1 until N is 0, and writes the accumulated checksum to OUT. Used by the
 * fault tests: memtrace holds a process at each exec, and a memtrace killed
 * then must not leave it stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: reexec OUT N ACC\n");
		return 2;
	}
	int n = atoi(argv[2]);
	unsigned long acc = strtoul(argv[3], 0, 10);
	char started[4096];
	snprintf(started, sizeof started, "%s.started", argv[1]);
	FILE *sf = fopen(started, "w");
	if (sf) {
		fprintf(sf, "%d\n", (int)getpid());
		fclose(sf);
	}
	for (int i = 0; i < 50; i++) {
		char *p = malloc(64 + i + n);
		memset(p, n + i, 64 + i + n);
		acc = acc * 31 + (unsigned char)p[i];
		free(p);
	}
	struct timespec ts = {0, 15 * 1000000L};
	nanosleep(&ts, 0);
	if (n > 0) {
		char nb[16], ab[32];
		snprintf(nb, sizeof nb, "%d", n - 1);
		snprintf(ab, sizeof ab, "%lu", acc);
		execl("/proc/self/exe", argv[0], argv[1], nb, ab, (char *)0);
		perror("exec");
		return 1;
	}
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "acc=%lu\n", acc);
	return fclose(f) != 0;
}
