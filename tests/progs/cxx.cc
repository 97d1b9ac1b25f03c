// cxx: every operator new / delete overload (T03, T04, T18), nothrow and
// aligned ones included; a failing nothrow new and a throwing new log
// nothing.
#include "truth.h"
#include <cstddef>
#include <new>

struct alignas(64) Wide {
	char b[64];
};

static const std::size_t HUGE_SIZE = SIZE_MAX - 4096; // above PTRDIFF_MAX: always refused

int main()
{
	truth_init();
	truth_setname("cxx-main");

	// T03 new / delete (scalar, through a type)
	int *i = (int *)escape(new int(7));
	truth_rec("new", sizeof(int), i);
	delete (int *)escape(i);
	truth_rec("delete", sizeof(int), i);

	// T04 new[] / delete[]
	char *a = (char *)escape(new char[100]);
	truth_rec("new[]", 100, a);
	delete[] (char *)escape(a);
	truth_rec("delete[]", 100, a);

	// the plain operators called directly
	void *p = escape(::operator new(40));
	truth_rec("new", 40, p);
	::operator delete(p);
	truth_rec("delete", 40, p);
	p = escape(::operator new[](41));
	truth_rec("new[]", 41, p);
	::operator delete[](p);
	truth_rec("delete[]", 41, p);

	// T18 sized deletes
	p = escape(::operator new(42));
	truth_rec("new", 42, p);
	::operator delete(p, (std::size_t)42);
	truth_rec("delete", 42, p);
	p = escape(::operator new[](43));
	truth_rec("new[]", 43, p);
	::operator delete[](p, (std::size_t)43);
	truth_rec("delete[]", 43, p);

	// nothrow new, nothrow delete
	p = escape(::operator new(44, std::nothrow));
	truth_rec("new", 44, p);
	::operator delete(p, std::nothrow);
	truth_rec("delete", 44, p);
	p = escape(::operator new[](45, std::nothrow));
	truth_rec("new[]", 45, p);
	::operator delete[](p, std::nothrow);
	truth_rec("delete[]", 45, p);

	// aligned new / delete
	std::align_val_t al = std::align_val_t(64);
	p = escape(::operator new(46, al));
	truth_rec("new", 46, p);
	::operator delete(p, al);
	truth_rec("delete", 46, p);
	p = escape(::operator new[](47, al));
	truth_rec("new[]", 47, p);
	::operator delete[](p, al);
	truth_rec("delete[]", 47, p);
	// sized + aligned
	p = escape(::operator new(48, al));
	truth_rec("new", 48, p);
	::operator delete(p, (std::size_t)48, al);
	truth_rec("delete", 48, p);
	p = escape(::operator new[](49, al));
	truth_rec("new[]", 49, p);
	::operator delete[](p, (std::size_t)49, al);
	truth_rec("delete[]", 49, p);
	// aligned + nothrow
	p = escape(::operator new(50, al, std::nothrow));
	truth_rec("new", 50, p);
	::operator delete(p, al, std::nothrow);
	truth_rec("delete", 50, p);
	p = escape(::operator new[](51, al, std::nothrow));
	truth_rec("new[]", 51, p);
	::operator delete[](p, al, std::nothrow);
	truth_rec("delete[]", 51, p);

	// an over-aligned type goes through the aligned operators
	Wide *w = (Wide *)escape(new Wide);
	truth_rec("new", sizeof(Wide), w);
	delete (Wide *)escape(w);
	truth_rec("delete", sizeof(Wide), w);
	Wide *wa = (Wide *)escape(new Wide[3]);
	truth_rec("new[]", 3 * sizeof(Wide), wa);
	delete[] (Wide *)escape(wa);
	truth_rec("delete[]", 3 * sizeof(Wide), wa);

	// failures log nothing: nothrow returns NULL, the others throw
	if (escape(::operator new(HUGE_SIZE, std::nothrow)))
		truth_die("huge nothrow new succeeded\n");
	if (escape(::operator new[](HUGE_SIZE, al, std::nothrow)))
		truth_die("huge aligned nothrow new[] succeeded\n");
	truth_gap(); // the exception object is allocated by the C++ runtime
	bool threw = false;
	try {
		escape(::operator new(HUGE_SIZE));
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	if (!threw)
		truth_die("huge new did not throw\n");

	// after a throw the tracer still logs (its reentrancy guard was reset)
	p = escape(::operator new(52));
	truth_rec("new", 52, p);
	::operator delete(p);
	truth_rec("delete", 52, p);

	truth_write();
	return 0;
}
