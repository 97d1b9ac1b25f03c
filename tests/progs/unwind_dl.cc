// unwind_dl: the library unwind_oracle dlopens (built like it, without
// frame pointers). It allocates from a recursion of its own and calls back
// into the program, which allocates too: program -> library -> program.
#define UT_LIBRARY
#include "unwind_truth.h"
#include <new>

typedef void (*ut_cb)(int salt);

extern "C" void unwind_dl_init(ut_record_fn f)
{
	ut_sink = f;
}

UT_NOINLINE static void dl_leaf(int lvl, int salt, ut_cb cb)
{
	volatile char buf[48];
	buf[0] = (char)lvl;
	size_t n = 700 + (size_t)salt;
	void *p = UT_ALLOC("malloc", n, malloc(n));
	UT_FREE("free", n, p);
	free(p);
	void *q = UT_ALLOC("new", n + 1, ::operator new(n + 1));
	UT_FREE("delete", n + 1, q);
	::operator delete(q);
	cb(salt);
	UT_BARRIER();
	if (buf[0] != (char)lvl)
		abort();
}

UT_NOINLINE static void dl_b(int lvl, int salt, ut_cb cb);

UT_NOINLINE static void dl_a(int lvl, int salt, ut_cb cb)
{
	volatile char buf[136];
	buf[0] = (char)lvl;
	buf[135] = (char)salt;
	if (lvl < 6)
		dl_b(lvl + 1, salt, cb);
	else
		dl_leaf(lvl, salt, cb);
	UT_BARRIER();
	if (buf[0] != (char)lvl)
		abort();
}

UT_NOINLINE static void dl_b(int lvl, int salt, ut_cb cb)
{
	volatile char buf[3000];
	buf[0] = (char)lvl;
	buf[2999] = (char)salt;
	if (lvl == 3) {
		size_t n = 900 + (size_t)salt;
		void *p = UT_ALLOC("new[]", n, ::operator new[](n));
		UT_FREE("delete[]", n, p);
		::operator delete[](p);
	}
	dl_a(lvl + 1, salt, cb);
	UT_BARRIER();
	if (buf[0] != (char)lvl)
		abort();
}

extern "C" void unwind_dl_work(int salt, ut_cb cb)
{
	dl_a(0, salt, cb);
	UT_BARRIER();
}
