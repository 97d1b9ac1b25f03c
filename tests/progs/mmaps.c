/* mmaps: T24 anonymous mmap / munmap, mremap, and file-backed mappings
 * that are not logged. */
#include "truth.h"
#include <sys/mman.h>

int main(int argc, char **argv)
{
	truth_init();
	long pg = sysconf(_SC_PAGESIZE);

	/* T24 anonymous mmap / munmap: size = length */
	size_t len = 3 * (size_t)pg;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		truth_die("mmap failed\n");
	truth_rec("mmap", len, m);
	m[0] = 1;
	if (munmap(m, len) != 0)
		truth_die("munmap failed\n");
	truth_rec("munmap", len, m);

	/* mremap: free (munmap) of the old range, then mremap of the new */
	size_t l1 = 2 * (size_t)pg, l2 = 64 * (size_t)pg;
	char *a = mmap(NULL, l1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		truth_die("mmap failed\n");
	truth_rec("mmap", l1, a);
	char *b = mremap(a, l1, l2, MREMAP_MAYMOVE);
	if (b == MAP_FAILED)
		truth_die("mremap failed\n");
	truth_rec("munmap", l1, a);
	truth_rec("mremap", l2, b);
	b[l2 - 1] = 1;
	/* a failed mremap (growing in place by 64 TiB) logs nothing and keeps
	 * the mapping */
	if (mremap(b, l2, (size_t)1 << 46, 0) != MAP_FAILED)
		truth_die("huge mremap succeeded\n");
	if (munmap(b, l2) != 0)
		truth_die("munmap failed\n");
	truth_rec("munmap", l2, b);

	/* file-backed: not logged (mmap nor munmap) */
	int fd = open(argv[0], O_RDONLY);
	if (fd < 0)
		truth_die("open self failed\n");
	void *f = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f == MAP_FAILED)
		truth_die("file mmap failed\n");
	escape(f);
	if (munmap(f, (size_t)pg) != 0)
		truth_die("file munmap failed\n");
	close(fd);

	/* a failed anonymous mmap logs nothing */
	if (mmap(NULL, (size_t)1 << 60, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
		truth_die("huge mmap succeeded\n");

	/* a malloc after the file mapping, so that an unexpected event would
	 * fall between two records */
	void *tail = escape(malloc(31));
	truth_rec("malloc", 31, tail);
	free(tail);
	truth_rec("free", 31, tail);
	(void)argc;
	truth_write();
	return 0;
}
