/* The C++ loop of scripts/bench-stacks.sh (issue 14): N iterations, each
 * a few levels deep, of what C++ code allocates all the time: an object
 * with new/delete, a std::string too long for its inline buffer and a
 * std::vector that grows. Built with -fno-omit-frame-pointer for
 * --stack-unwind fp. Timed inside the program (CLOCK_MONOTONIC), so that
 * start-up and attach stay out of the figure; prints ns per iteration */
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

struct Node {
	long key;
	std::string name;
	std::vector<int> vals;
};

__attribute__((noinline)) static Node *make(long i)
{
	Node *n = new Node; // 1
	n->key = i;
	n->name = "node-with-a-name-longer-than-sso-" + std::to_string(i); // 1-2
	for (int k = 0; k < 5; k++)
		n->vals.push_back(k); // 1, 2, 4, 8: 4 allocations
	return n;
}

__attribute__((noinline)) static long use(long i)
{
	Node *n = make(i);
	long r = n->key + (long)n->name.size() + (long)n->vals.size();
	delete n;
	return r;
}

__attribute__((noinline)) static long work(long n)
{
	long r = 0;
	for (long i = 0; i < n; i++)
		r += use(i);
	return r;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 50000;
	volatile long sink = work(1000); // warm-up: lazy binding, arena set-up
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	sink = work(n);
	clock_gettime(CLOCK_MONOTONIC, &b);
	(void)sink;
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", ns / n);
	return 0;
}
