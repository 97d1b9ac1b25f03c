// runend keeps five 1000-byte blocks for good, then returns 3, dies of
// SIGSEGV ("segv") or SIGTERM ("term"), or runs until killed ("forever")
// with up to 64 blocks of 100 bytes live at any moment: how a run ends,
// for the exit lines of the eBPF path (tests/runend_test.go) and of
// --preload (fallback-preload/exitstatus_test.go). Built with -fno-builtin,
// so that the blocks nothing reads are still allocated.
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	for (int i = 0; i < 5; i++)
		memset(malloc(1000), 1, 1000);
	if (argc > 1 && !strcmp(argv[1], "forever")) {
		void *ring[64] = {0};
		for (unsigned i = 0;; i++) {
			free(ring[i % 64]);
			ring[i % 64] = malloc(100);
			usleep(500);
		}
	}
	if (argc > 1 && !strcmp(argv[1], "segv"))
		raise(SIGSEGV);
	if (argc > 1 && !strcmp(argv[1], "term"))
		raise(SIGTERM);
	return 3;
}
