// stack.c: the walk both modes' stacks come from: glibc backtrace (frame
// pointers or unwind tables), dladdr1 for the module and symbol.
#include "stack.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

void stack_walk(void (*fn)(void *ctx, const mt_frame *f), void *ctx)
{
	void *pcs[128 + 16];
	// Room for the library's own frames, which are left out.
	int want = stack_depth + 16;
	if (want > (int)(sizeof pcs / sizeof pcs[0]))
		want = (int)(sizeof pcs / sizeof pcs[0]);
	int n = backtrace(pcs, want);
	int count = 0;
	for (int i = 0; i < n && count < stack_depth; i++) {
		Dl_info info;
		struct link_map *lm = NULL;
		uintptr_t a = (uintptr_t)pcs[i];
		int ok = dladdr1(pcs[i], &info, (void **)&lm, RTLD_DL_LINKMAP);
		if (ok && (uintptr_t)info.dli_fbase == self_base)
			continue;
		mt_frame f = {a, 0, NULL, NULL};
		if (ok && info.dli_fname && info.dli_fname[0]) {
			f.mod = info.dli_fname;
			if (info.dli_sname && info.dli_saddr) {
				f.sym = info.dli_sname;
				f.off = a - (uintptr_t)info.dli_saddr;
			} else {
				f.off = a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)info.dli_fbase);
			}
		}
		fn(ctx, &f);
		count++;
	}
}
