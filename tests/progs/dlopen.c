/* dlopen: allocations and frees made by a library loaded with dlopen. */
#include "truth.h"
#include <dlfcn.h>
#include <limits.h>

int main(void)
{
	truth_init();
	truth_setname("dlopen-main");
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
	if (n <= 0)
		truth_die("readlink /proc/self/exe failed\n");
	path[n] = 0;
	char *slash = strrchr(path, '/');
	strcpy(slash + 1, "libdlalloc.so");

	truth_gap(); /* dlopen allocates its own structures */
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		truth_die("dlopen libdlalloc.so failed\n");
	void *(*dl_alloc)(size_t) = (void *(*)(size_t))dlsym(h, "dl_alloc");
	char *(*dl_dup)(const char *) = (char *(*)(const char *))dlsym(h, "dl_dup");
	void *(*dl_calloc)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(h, "dl_calloc");
	void (*dl_free)(void *) = (void (*)(void *))dlsym(h, "dl_free");
	if (!dl_alloc || !dl_dup || !dl_calloc || !dl_free)
		truth_die("dlsym failed\n");

	void *a = escape(dl_alloc(333));
	truth_rec("malloc", 333, a);
	char *d = escape(dl_dup("from a dlopened library"));
	truth_rec("strdup", 24, d);
	void *c = escape(dl_calloc(3, 33));
	truth_rec("calloc", 99, c);
	dl_free(a);
	truth_rec("free", 333, a);
	dl_free(d);
	truth_rec("free", 24, d);
	/* freed by the program, allocated by the library */
	free(c);
	truth_rec("free", 99, c);

	truth_gap();
	dlclose(h);
	void *after = escape(malloc(44));
	truth_rec("malloc", 44, after);
	free(after);
	truth_rec("free", 44, after);
	truth_write();
	return 0;
}
