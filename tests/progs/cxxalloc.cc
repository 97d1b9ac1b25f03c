// cxxalloc: operator new/delete under whichever allocator serves them
// (libstdc++'s over glibc's malloc, or jemalloc's, tcmalloc's,
// mimalloc's own, linked or preloaded; issue 17): sized, aligned and
// nothrow overloads, a throwing new caught by the program (the throw
// unwinds through the allocator's new: memtrace must not break that), a
// failing nothrow new, and news from another frame after a throw. ROUNDS
// (default 20) repeats it all. CXXALLOC_NO_THROW=1 leaves the throwing
// news out: mimalloc's (2.0.9, Debian's) calls abort() where the others
// throw, whatever the new handler (its get_new_handler is a weak function
// of its own, bound inside the library, that returns none).
#include "truth.h"
#include <cstddef>
#include <new>

static const std::size_t HUGE_SIZE = (std::size_t)1 << 62; // refused by every allocator

struct Obj {
	char b[72];
};

static int caught;
static bool no_throw;

// A new from a deeper frame than main's, right after a throw: it must not
// be taken for one made inside the new that threw.
__attribute__((noinline)) static void deeper(int r)
{
	void *p = escape(::operator new(48 + r));
	truth_rec("new", 48 + r, p);
	::operator delete(p, 48 + r);
	truth_rec("delete", 48 + r, p);
}

__attribute__((noinline)) static void throwing(int r)
{
	if (escape(::operator new(HUGE_SIZE, std::nothrow)) != nullptr)
		truth_die("a huge nothrow new succeeded\n");
	if (no_throw)
		return;
	truth_gap(); // the runtime allocates the exception and frees it after the catch
	try {
		void *p = escape(::operator new(HUGE_SIZE));
		truth_die("a huge new succeeded\n");
		(void)p;
	} catch (const std::bad_alloc &) {
		caught++;
	}
	if (r & 1) {
		try {
			void *p = escape(::operator new[](HUGE_SIZE, std::align_val_t(64)));
			truth_die("a huge aligned new succeeded\n");
			(void)p;
		} catch (const std::bad_alloc &) {
			caught++;
		}
	}
}

int main()
{
	const char *rs = getenv("ROUNDS");
	int rounds = rs ? atoi(rs) : 20;
	no_throw = getenv("CXXALLOC_NO_THROW") != nullptr;
	truth_init();
	truth_setname("cxxalloc-main");
	for (int r = 0; r < rounds; r++) {
		void *a = escape(::operator new(40 + r));
		truth_rec("new", 40 + r, a);
		void *b = escape(::operator new[](100));
		truth_rec("new[]", 100, b);
		void *c = escape(::operator new(256, std::align_val_t(64)));
		truth_rec("new", 256, c);
		void *d = escape(::operator new[](512, std::align_val_t(128)));
		truth_rec("new[]", 512, d);
		void *e = escape(::operator new(24, std::nothrow));
		truth_rec("new", 24, e);
		void *f = escape(::operator new[](64, std::nothrow));
		truth_rec("new[]", 64, f);
		void *g = escape(::operator new(96, std::align_val_t(32), std::nothrow));
		truth_rec("new", 96, g);
		Obj *o = (Obj *)escape(new Obj);
		truth_rec("new", sizeof(Obj), o);

		throwing(r);
		deeper(r);

		delete (Obj *)escape(o); // sized: operator delete(void*, size_t)
		truth_rec("delete", sizeof(Obj), o);
		::operator delete(g, std::align_val_t(32));
		truth_rec("delete", 96, g);
		::operator delete[](f, std::nothrow);
		truth_rec("delete[]", 64, f);
		::operator delete(e, std::nothrow);
		truth_rec("delete", 24, e);
		::operator delete[](d, 512, std::align_val_t(128));
		truth_rec("delete[]", 512, d);
		::operator delete(c, 256, std::align_val_t(64));
		truth_rec("delete", 256, c);
		::operator delete[](b);
		truth_rec("delete[]", 100, b);
		::operator delete(a, 40 + r);
		truth_rec("delete", 40 + r, a);
	}
	truth_write();
	if (!no_throw && caught != rounds + rounds / 2)
		truth_die("cxxalloc: a throwing new was not caught\n");
	return 0;
}
