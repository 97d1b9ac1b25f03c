// temporaries: where heaptrack's count of temporary allocations, heaptrack_print's
// and memtrace's differ (docs/temporaries.md). One thread; the loops' lengths
// differ, so that each count says which loop it comes from.
#include <stdlib.h>

// The compiler may not drop a malloc whose block escapes here, nor unroll a
// loop of two calls into two call sites.
void *volatile sink;
volatile int two = 2;

__attribute__((noinline)) static void alone(void)
{
	// Freed before anything else is allocated: temporary for all three.
	for (int i = 0; i < 100; i++) {
		sink = malloc(32);
		free(sink);
	}
}

__attribute__((noinline)) static void pairs(void)
{
	// Two blocks from one call stack, of one size, freed oldest first.
	for (int i = 0; i < 1000; i++) {
		void *p[2];
		for (int j = 0; j < two; j++)
			sink = p[j] = malloc(16);
		free(p[0]); // heaptrack_print: temporary (p[1] has p[0]'s size and stack)
		free(p[1]); // memtrace: temporary (its thread allocated nothing since)
	}
}

__attribute__((noinline)) static void *get(void)
{
	return malloc(48);
}

__attribute__((noinline)) static void paths(void)
{
	// One allocating function, two callers: its blocks are kept on one path,
	// temporary on the other. Its entry counts both paths' allocations.
	void *keep[10];
	for (int i = 0; i < 10; i++)
		sink = keep[i] = get();
	for (int i = 0; i < 10; i++) {
		sink = get();
		free(sink);
	}
	for (int i = 0; i < 10; i++)
		free(keep[i]);
}

int main(void)
{
	alone();
	pairs();
	paths();
	return 0;
}
