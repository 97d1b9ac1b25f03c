/* fleet: a small service for the --comm tests and bench (docs/fleet.md).
 *
 *   fleet                keep FLEET_N blocks of FLEET_SIZE from fleet_keep,
 *                        print "ready", then wait for a byte (or EOF) on
 *                        stdin and exit
 *   fleet loop N         then N malloc(64)+free pairs, printing the loop's
 *                        CPU ns per pair (the process's CPU time, which a
 *                        probe's trap would add to and other processes'
 *                        load does not), and exit (no wait): an untraced
 *                        neighbour's speed
 *
 * It never renames itself: its comm is the name it was exec'd by, which
 * the tests choose (a copy of this file under a name of their own). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define FLEET_N 40
#define FLEET_SIZE 4096

static void *volatile sink;
static void *kept[FLEET_N];

__attribute__((noinline)) void *fleet_keep(size_t n)
{
	return malloc(n);
}

int main(int argc, char **argv)
{
	for (int i = 0; i < FLEET_N; i++)
		kept[i] = fleet_keep(FLEET_SIZE);
	if (argc > 2) {
		long n = atol(argv[2]);
		struct timespec a, b;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		for (long i = 0; i < n; i++) {
			sink = malloc(64);
			free(sink);
		}
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
		double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
		printf("%.1f\n", ns / (double)n);
		return 0;
	}
	printf("ready\n");
	fflush(stdout);
	char c;
	(void)!read(0, &c, 1);
	return kept[0] == 0;
}
