/* libcmemalign: glibc's __libc_memalign, the allocation function added by
 * following docs/development.md's "Adding an allocation function": each
 * call is logged under its own name, exactly, on both paths. */
#include "truth.h"
#include <malloc.h>

#ifdef __GLIBC__
/* Exported by glibc, declared by no header. */
extern void *__libc_memalign(size_t align, size_t size);
#endif

int main(void)
{
	truth_init();
	truth_setname("libcmemalign");
#ifdef __GLIBC__
	for (int i = 0; i < 4; i++) {
		size_t size = 333 + (size_t)i * 100;
		void *p = escape(__libc_memalign(64, size));
		if (!p || (uintptr_t)p % 64)
			truth_die("__libc_memalign failed\n");
		truth_rec("__libc_memalign", size, p);
		free(p);
		truth_rec("free", size, p);
	}
#endif
	/* memalign beside it keeps its own name. */
	void *m = escape(memalign(128, 300));
	truth_rec("memalign", 300, m);
	free(m);
	truth_rec("free", 300, m);
	truth_write();
	return 0;
}
