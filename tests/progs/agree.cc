// agree: one leak (leak_nodes, 1000 blocks of 264 bytes), a hot loop of
// temporaries (std::string and std::vector made and dropped), linked
// against libstdc++ so that its emergency exception pool (a built-in
// suppression) is in the log too. tests/agree_test.go reads one trace of
// it through every reader.
#include "truth.h"
#include <cstring>
#include <string>
#include <vector>

struct Node {
	Node *next;
	char payload[264 - sizeof(Node *)];
};

static_assert(sizeof(Node) == 264, "the leak's block size");

__attribute__((noinline)) static Node *leak_nodes(int n)
{
	Node *head = nullptr;
	for (int k = 0; k < n; k++) {
		Node *x = new Node;
		std::memset(x->payload, k, sizeof x->payload);
		x->next = head;
		head = (Node *)escape(x);
	}
	return head;
}

__attribute__((noinline)) static std::size_t hot_loop(int rounds)
{
	std::size_t total = 0;
	for (int k = 0; k < rounds; k++) {
		std::string s(100 + k % 50, 'x');
		std::vector<int> v(32 + k % 16, k);
		escape(s.data());
		escape(v.data());
		total += s.size() + v.size();
	}
	return total;
}

int main()
{
	Node *leaked = leak_nodes(1000);
	escape(leaked);
	std::string name("a string long enough to live on the heap, not in the object");
	escape(name.data());
	return hot_loop(5000) == 0;
}
