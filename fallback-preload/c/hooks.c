// hooks.c: the interposed functions: every allocation function of docs/spec.md §3,
// the C++ operators, thread renames, exec, _exit and dlclose. Each hook calls the
// real function and hands the event to the current sink (mt.h); the mode
// is the sink's, so the hooks test none.
//
//   - Reentrancy: t_in makes calls made by the allocator or by this library
//     (malloc inside strdup, inside operator new, ...) pass straight
//     through, so that one outermost call logs one event.
//   - Bootstrap: dlsym may allocate before the real functions are known;
//     those requests are served from a static arena. Calls made before the
//     constructor go to the early buffer (early.c).
#include "mt.h"
#include "modules.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>

#if __SIZEOF_SIZE_T__ == 8
#define ZSZ "m"
#else
#define ZSZ "j"
#endif

__thread int t_in TLS_IE;
__thread uintptr_t t_caller TLS_IE;

// ---------------------------------------------------------------------------
// Real functions.

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static void (*real_free)(void *);
static char *(*real_strdup)(const char *);
static char *(*real_strndup)(const char *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
// The generated hooks' functions (MT_SIMPLE_HOOKS, from internal/ops).
#define REAL_DECL_(NAME, OP, ARGS, CALL, SIZE) static void *(*real_##NAME) ARGS;
MT_SIMPLE_HOOKS(REAL_DECL_)
#undef REAL_DECL_
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
#if __SIZEOF_POINTER__ == 4
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
#endif
static int (*real_munmap)(void *, size_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static int (*real_pthread_setname_np)(pthread_t, const char *);
static int (*real_prctl)(int, unsigned long, unsigned long, unsigned long, unsigned long);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);
static int (*real_dlclose)(void *);

static volatile int resolving;
static volatile int resolved;

// Bootstrap arena for allocations made while dlsym runs. Each block has a
// size header so that realloc of a bootstrap block can copy it.
static char boot_arena[64 << 10] __attribute__((aligned(64)));
static size_t boot_used;

static int is_boot(const void *p)
{
	return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t n)
{
	size_t need = (n + 31) & ~(size_t)15;
	size_t off = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
	if (off + need > sizeof boot_arena)
		return NULL;
	*(size_t *)(boot_arena + off) = n;
	return boot_arena + off + 16;
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)((const char *)p - 16);
}

static void *sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void resolve(void)
{
	if (resolved)
		return;
	resolving = 1;
	real_malloc = sym("malloc");
	real_calloc = sym("calloc");
	real_realloc = sym("realloc");
	real_free = sym("free");
	real_reallocarray = sym("reallocarray");
	real_strdup = sym("strdup");
	real_strndup = sym("strndup");
	real_posix_memalign = sym("posix_memalign");
#define REAL_SYM_(NAME, OP, ARGS, CALL, SIZE) real_##NAME = sym(#NAME);
	MT_SIMPLE_HOOKS(REAL_SYM_)
#undef REAL_SYM_
	real_mmap = sym("mmap");
#if __SIZEOF_POINTER__ == 4
	real_mmap64 = sym("mmap64");
#endif
	real_munmap = sym("munmap");
	real_mremap = sym("mremap");
	real_pthread_setname_np = sym("pthread_setname_np");
	real_prctl = sym("prctl");
	real_execve = sym("execve");
	real_execvpe = sym("execvpe");
	real_fexecve = sym("fexecve");
	real_dlclose = sym("dlclose");
	resolving = 0;
	__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

static void clear_in(int *p)
{
	t_in = *p;
}
// ENTER sets t_in for the rest of the hook; the cleanup restores it also
// when a throwing operator new unwinds through the hook. It also keeps
// the hook's caller (mt.h, t_caller).
#define ENTER int in_saved __attribute__((cleanup(clear_in))) = t_in; t_in = 1; SET_CALLER()
#define ENSURE() do { if (UNLIKELY(!resolved)) resolve(); } while (0)

// ---------------------------------------------------------------------------
// The C allocation functions.

EXPORT void *malloc(size_t n)
{
	if (UNLIKELY(!real_malloc)) {
		if (resolving)
			return boot_alloc(n);
		resolve();
	}
	if (t_in)
		return real_malloc(n);
	ENTER;
	void *p = real_malloc(n);
	if (p)
		sink()->alloc(MT_OP_MALLOC, n, p, 0);
	return p;
}

EXPORT void *calloc(size_t a, size_t b)
{
	if (UNLIKELY(!real_calloc)) {
		if (resolving) {
			if (b && a > SIZE_MAX / b)
				return NULL;
			return boot_alloc(a * b); // static memory is zero
		}
		resolve();
	}
	if (t_in)
		return real_calloc(a, b);
	ENTER;
	void *p = real_calloc(a, b);
	if (p)
		sink()->alloc(MT_OP_CALLOC, (uint64_t)a * b, p, 0);
	return p;
}

EXPORT void free(void *p)
{
	if (!p || is_boot(p))
		return;
	if (UNLIKELY(!real_free))
		resolve();
	if (t_in) {
		real_free(p);
		return;
	}
	ENTER;
	sink()->free(MT_OP_FREE, p, real_free);
}

static void *do_realloc(void *p, size_t n, int op, void *(*fn)(void *, size_t, size_t), size_t a, size_t b)
{
	if (p && is_boot(p)) {
		void *q = (op == MT_OP_REALLOC) ? real_malloc(n) : (b && a > SIZE_MAX / b ? NULL : real_malloc(a * b));
		if (q) {
			size_t old = boot_size(p);
			memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	if (t_in)
		return op == MT_OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
	ENTER;
	const mt_sink *s = sink();
	mt_call_t c;
	s->realloc_pre(&c, p);
	void *q = op == MT_OP_REALLOC ? real_realloc(p, n) : fn(p, a, b);
	s->realloc_post(&c, op, p, q, n);
	return q;
}

EXPORT void *realloc(void *p, size_t n)
{
	if (UNLIKELY(!real_realloc)) {
		if (resolving) {
			void *q = boot_alloc(n);
			if (q && p)
				memcpy(q, p, boot_size(p) < n ? boot_size(p) : n);
			return q;
		}
		resolve();
	}
	return do_realloc(p, n, MT_OP_REALLOC, NULL, 0, 0);
}

EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
	ENSURE();
	if (b && a > SIZE_MAX / b) {
		errno = ENOMEM;
		return NULL;
	}
	return do_realloc(p, a * b, MT_OP_REALLOCARRAY, real_reallocarray, a, b);
}

EXPORT char *strdup(const char *s)
{
	ENSURE();
	if (t_in)
		return real_strdup(s);
	ENTER;
	char *p = real_strdup(s);
	if (p)
		sink()->alloc(MT_OP_STRDUP, strlen(p) + 1, p, 0);
	return p;
}

EXPORT char *strndup(const char *s, size_t n)
{
	ENSURE();
	if (t_in)
		return real_strndup(s, n);
	ENTER;
	char *p = real_strndup(s, n);
	if (p)
		sink()->alloc(MT_OP_STRNDUP, strlen(p) + 1, p, 0);
	return p;
}

EXPORT int posix_memalign(void **out, size_t al, size_t n)
{
	ENSURE();
	if (t_in)
		return real_posix_memalign(out, al, n);
	ENTER;
	int r = real_posix_memalign(out, al, n);
	if (r == 0 && *out)
		sink()->alloc(MT_OP_POSIX_MEMALIGN, n, *out, 0);
	return r;
}

#define ALIGNED_HOOK(NAME, OP, ARGS, CALL, SIZE)       \
	EXPORT void *NAME ARGS                         \
	{                                              \
		ENSURE();                              \
		if (t_in)                              \
			return real_##NAME CALL;       \
		ENTER;                                 \
		void *p = real_##NAME CALL;            \
		if (p)                                 \
			sink()->alloc(OP, SIZE, p, 0); \
		return p;                              \
	}

// aligned_alloc, memalign, valloc, pvalloc and the others of
// internal/ops/table.go with a Hook.
MT_SIMPLE_HOOKS(ALIGNED_HOOK)

// ---------------------------------------------------------------------------
// The mmap family: anonymous mappings only, unless MEMTRACE_MMAP_FILES=1.

static void *mmap_common(void *r, size_t len, int flags)
{
	if (r != MAP_FAILED && ((flags & MAP_ANONYMOUS) || mmap_files))
		sink()->alloc(MT_OP_MMAP, len, r, V_MMAP);
	return r;
}

EXPORT void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	ENSURE();
	if (t_in)
		return real_mmap(a, len, prot, flags, fd, off);
	ENTER;
	return mmap_common(real_mmap(a, len, prot, flags, fd, off), len, flags);
}

#if __SIZEOF_POINTER__ == 4
EXPORT void *mmap64(void *a, size_t len, int prot, int flags, int fd, off64_t off)
{
	ENSURE();
	if (t_in)
		return real_mmap64(a, len, prot, flags, fd, off);
	ENTER;
	return mmap_common(real_mmap64(a, len, prot, flags, fd, off), len, flags);
}
#endif

EXPORT int munmap(void *p, size_t len)
{
	ENSURE();
	if (t_in)
		return real_munmap(p, len);
	ENTER;
	const mt_sink *s = sink();
	mt_call_t c;
	s->unmap_pre(&c, p);
	int r = real_munmap(p, len);
	s->unmap_post(&c, p, len, r == 0);
	return r;
}

EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	ENSURE();
	void *na = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		na = va_arg(ap, void *);
		va_end(ap);
	}
	if (t_in)
		return real_mremap(old, oldlen, newlen, flags, na);
	ENTER;
	const mt_sink *s = sink();
	mt_call_t c;
	s->unmap_pre(&c, old);
	void *r = real_mremap(old, oldlen, newlen, flags, na);
	s->remap_post(&c, old, oldlen, r, newlen);
	return r;
}

// ---------------------------------------------------------------------------
// C++ operators: the real ones (libstdc++'s) run with t_in set, so their
// inner malloc is not logged; a throwing new unwinds through here (the
// library is built with -fexceptions) and the cleanup restores t_in.

typedef void *(*new_fn)(size_t);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);
typedef void (*del_fn)(void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_al_fn)(void *, size_t);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

#define LAZY(var, type, name)                \
	static type var;                     \
	if (UNLIKELY(!var)) {                \
		ENSURE();                    \
		var = (type)sym(name);       \
	}

#define NEW_HOOK(CNAME, MANGLED, OP, PARAMS, TYPE, CALL)        \
	EXPORT void *CNAME PARAMS __asm__(MANGLED);             \
	void *CNAME PARAMS                                      \
	{                                                       \
		LAZY(fn, TYPE, MANGLED);                        \
		if (t_in)                                       \
			return fn CALL;                         \
		ENTER;                                          \
		void *p = fn CALL;                              \
		if (p)                                          \
			sink()->alloc(OP, n, p, 0);             \
		return p;                                       \
	}

// One operator per line, a table: clang-format would wrap the long rows.
// clang-format off
NEW_HOOK(mt_new, "_Znw" ZSZ, MT_OP_NEW, (size_t n), new_fn, (n))
NEW_HOOK(mt_newa, "_Zna" ZSZ, MT_OP_NEW_ARR, (size_t n), new_fn, (n))
NEW_HOOK(mt_new_nt, "_Znw" ZSZ "RKSt9nothrow_t", MT_OP_NEW, (size_t n, const void *nt), new_nt_fn, (n, nt))
NEW_HOOK(mt_newa_nt, "_Zna" ZSZ "RKSt9nothrow_t", MT_OP_NEW_ARR, (size_t n, const void *nt), new_nt_fn, (n, nt))
NEW_HOOK(mt_new_al, "_Znw" ZSZ "St11align_val_t", MT_OP_NEW, (size_t n, size_t al), new_al_fn, (n, al))
NEW_HOOK(mt_newa_al, "_Zna" ZSZ "St11align_val_t", MT_OP_NEW_ARR, (size_t n, size_t al), new_al_fn, (n, al))
NEW_HOOK(mt_new_al_nt, "_Znw" ZSZ "St11align_val_tRKSt9nothrow_t", MT_OP_NEW, (size_t n, size_t al, const void *nt), new_al_nt_fn, (n, al, nt))
NEW_HOOK(mt_newa_al_nt, "_Zna" ZSZ "St11align_val_tRKSt9nothrow_t", MT_OP_NEW_ARR, (size_t n, size_t al, const void *nt), new_al_nt_fn, (n, al, nt))
// clang-format on

#define DEL_HOOK(CNAME, MANGLED, OP, PARAMS, TYPE, CALL)        \
	EXPORT void CNAME PARAMS __asm__(MANGLED);              \
	void CNAME PARAMS                                       \
	{                                                       \
		LAZY(fn, TYPE, MANGLED);                        \
		if (!p || t_in) {                               \
			fn CALL;                                \
			return;                                 \
		}                                               \
		ENTER;                                          \
		const mt_sink *s = sink();                      \
		mt_call_t c;                                    \
		s->free_pre(&c, p);                             \
		fn CALL;                                        \
		s->free_post(&c, OP, p);                        \
	}

// The plain delete and delete[] have free's signature: one call.
#define DEL_HOOK_PLAIN(CNAME, MANGLED, OP)                      \
	EXPORT void CNAME(void *p) __asm__(MANGLED);            \
	void CNAME(void *p)                                     \
	{                                                       \
		LAZY(fn, del_fn, MANGLED);                      \
		if (!p || t_in) {                               \
			fn(p);                                  \
			return;                                 \
		}                                               \
		ENTER;                                          \
		sink()->free(OP, p, fn);                        \
	}

// clang-format off
DEL_HOOK_PLAIN(mt_del, "_ZdlPv", MT_OP_DELETE)
DEL_HOOK_PLAIN(mt_dela, "_ZdaPv", MT_OP_DELETE_ARR)
DEL_HOOK(mt_del_sz, "_ZdlPv" ZSZ, MT_OP_DELETE, (void *p, size_t sz), del_sz_fn, (p, sz))
DEL_HOOK(mt_dela_sz, "_ZdaPv" ZSZ, MT_OP_DELETE_ARR, (void *p, size_t sz), del_sz_fn, (p, sz))
DEL_HOOK(mt_del_al, "_ZdlPvSt11align_val_t", MT_OP_DELETE, (void *p, size_t al), del_al_fn, (p, al))
DEL_HOOK(mt_dela_al, "_ZdaPvSt11align_val_t", MT_OP_DELETE_ARR, (void *p, size_t al), del_al_fn, (p, al))
DEL_HOOK(mt_del_sz_al, "_ZdlPv" ZSZ "St11align_val_t", MT_OP_DELETE, (void *p, size_t sz, size_t al), del_sz_al_fn, (p, sz, al))
DEL_HOOK(mt_dela_sz_al, "_ZdaPv" ZSZ "St11align_val_t", MT_OP_DELETE_ARR, (void *p, size_t sz, size_t al), del_sz_al_fn, (p, sz, al))
DEL_HOOK(mt_del_nt, "_ZdlPvRKSt9nothrow_t", MT_OP_DELETE, (void *p, const void *nt), del_nt_fn, (p, nt))
DEL_HOOK(mt_dela_nt, "_ZdaPvRKSt9nothrow_t", MT_OP_DELETE_ARR, (void *p, const void *nt), del_nt_fn, (p, nt))
DEL_HOOK(mt_del_al_nt, "_ZdlPvSt11align_val_tRKSt9nothrow_t", MT_OP_DELETE, (void *p, size_t al, const void *nt), del_al_nt_fn, (p, al, nt))
DEL_HOOK(mt_dela_al_nt, "_ZdaPvSt11align_val_tRKSt9nothrow_t", MT_OP_DELETE_ARR, (void *p, size_t al, const void *nt), del_al_nt_fn, (p, al, nt))
// clang-format on

// ---------------------------------------------------------------------------
// Thread names: a rename bumps a generation that every thread checks on
// its next event (the other thread's name is re-read from the kernel then).

EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	ENSURE();
	int r = real_pthread_setname_np(th, name);
	if (r == 0)
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	return r;
}

EXPORT int prctl(int option, ...)
{
	ENSURE();
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	int r = real_prctl(option, a2, a3, a4, a5);
	if (r == 0 && option == PR_SET_NAME)
		__atomic_add_fetch(&name_gen, 1, __ATOMIC_RELAXED);
	return r;
}

// A dlclose may unmap a library, and a later load put another file at its
// addresses: the walks ask the loader from its start until one after its
// end (modules.h). A dlopen needs no hook: a PC of a library loaded since
// lies in no segment of the table, and that makes the walk ask.
EXPORT int dlclose(void *h)
{
	ENSURE();
	modules_close_begin();
	int r = real_dlclose(h);
	modules_close_end();
	return r;
}

// ---------------------------------------------------------------------------
// exec and _exit discard the process's memory: write what is pending first.

static void before_exec(void)
{
	int in = t_in;
	t_in = 1;
	sink()->before_exec();
	t_in = in;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_execve(path, argv, envp);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_execvpe(file, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	ENSURE();
	before_exec();
	return real_fexecve(fd, argv, envp);
}

#define COLLECT_ARGS(first, ap, argv)                                   \
	do {                                                            \
		size_t n_ = 1;                                          \
		va_list c_;                                             \
		va_copy(c_, ap);                                        \
		while (va_arg(c_, char *))                              \
			n_++;                                           \
		va_end(c_);                                             \
		argv = alloca((n_ + 1) * sizeof(char *));               \
		argv[0] = (char *)(first);                              \
		for (size_t i_ = 1; i_ <= n_; i_++)                     \
			argv[i_] = i_ < n_ ? va_arg(ap, char *) : NULL; \
	} while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	(void)va_arg(ap, char *); // the NULL that ends the arguments
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}

EXPORT void _exit(int status)
{
	sink()->process_exit();
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	_exit(status);
}
