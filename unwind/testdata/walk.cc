// The walk test's subject, built -O2 -fomit-frame-pointer. At chosen
// points it calls snap(), an assembly stub that records the registers at
// its own first instruction (as a uprobe at a function's entry sees them)
// and tail-jumps to snap_c(), which takes glibc's backtrace() and writes
// DIR/NAME.txt (registers, backtrace, /proc/self/maps) and DIR/NAME.stack
// (the thread's stack from the recorded SP to its top). The Go test walks
// that stack with the unwind tables and must reproduce backtrace() frame
// for frame.
//
// Usage: walk DIR
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <new>
#include <pthread.h>
#include <thread>
#include <vector>

extern "C" {
struct snap_regs_t {
  uint64_t pc, sp, fp, lr;
};
snap_regs_t snap_regs;
void snap(void);
void snap_c(void);
// nocfi_call(fn) calls fn through a frame-pointer frame with no CFI, to
// exercise the walker's frame-pointer fallback in a gap.
void nocfi_call(void (*fn)(void));
// noret_call(fn) calls fn, which never returns, as its last instruction;
// the return address is then the first byte of the next function, whose
// rule differs: only a walker that looks up return address - 1 gets it right.
void noret_call(void (*fn)(void));
void after_noret(void);
}

#if defined(__x86_64__)
asm(R"(
  .text
  .globl snap
  .type snap, @function
snap:
  .cfi_startproc
  leaq snap(%rip), %rax
  movq %rax, snap_regs(%rip)
  movq %rsp, snap_regs+8(%rip)
  movq %rbp, snap_regs+16(%rip)
  jmp snap_c
  .cfi_endproc
  .size snap, .-snap

  .globl nocfi_call
  .type nocfi_call, @function
nocfi_call:
  pushq %rbp
  movq %rsp, %rbp
  callq *%rdi
  popq %rbp
  retq
  .size nocfi_call, .-nocfi_call
  # keep the next function more than MinGap away so this stays a gap
  .p2align 6

  .globl noret_call
  .type noret_call, @function
noret_call:
  .cfi_startproc
  subq $24, %rsp
  .cfi_adjust_cfa_offset 24
  callq *%rdi
  .cfi_endproc
  .size noret_call, .-noret_call
  .globl after_noret
  .type after_noret, @function
after_noret:
  .cfi_startproc
  retq
  .cfi_endproc
  .size after_noret, .-after_noret
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .globl snap
  .type snap, %function
snap:
  .cfi_startproc
  adrp x9, snap_regs
  add x9, x9, :lo12:snap_regs
  adr x10, snap
  str x10, [x9]
  mov x10, sp
  str x10, [x9, 8]
  str x29, [x9, 16]
  str x30, [x9, 24]
  b snap_c
  .cfi_endproc
  .size snap, .-snap

  .globl nocfi_call
  .type nocfi_call, %function
nocfi_call:
  stp x29, x30, [sp, -16]!
  mov x29, sp
  blr x0
  ldp x29, x30, [sp], 16
  ret
  .size nocfi_call, .-nocfi_call
  .p2align 6

  .globl noret_call
  .type noret_call, %function
noret_call:
  .cfi_startproc
  sub sp, sp, 32
  .cfi_def_cfa_offset 32
  str x30, [sp, 8]
  .cfi_offset x30, -24
  blr x0
  .cfi_endproc
  .size noret_call, .-noret_call
  .globl after_noret
  .type after_noret, %function
after_noret:
  .cfi_startproc
  ret
  .cfi_endproc
  .size after_noret, .-after_noret
)");
#else
#error "x86-64 or arm64 only"
#endif

static const char *out_dir;
static const char *snap_name = "none";
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what) {
  perror(what);
  _exit(3);
}

static uint64_t stack_top(uint64_t sp) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) die("pthread_getattr_np");
  void *addr;
  size_t size;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  uint64_t top = (uint64_t)addr + size;
  if (sp >= top || sp < (uint64_t)addr) {
    fprintf(stderr, "sp %#lx outside the stack [%p, %#lx)\n", (unsigned long)sp, addr, (unsigned long)top);
    _exit(3);
  }
  return top;
}

extern "C" __attribute__((noinline, used)) void snap_c(void) {
  void *bt[128];
  int n = backtrace(bt, 128);
  snap_regs_t r = snap_regs;
  pthread_mutex_unlock(&snap_lock);
  uint64_t top = stack_top(r.sp);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.txt", out_dir, snap_name);
  FILE *f = fopen(path, "w");
  if (!f) die(path);
  fprintf(f, "regs %#lx %#lx %#lx %#lx\n", (unsigned long)r.pc, (unsigned long)r.sp, (unsigned long)r.fp,
          (unsigned long)r.lr);
  fprintf(f, "stack %#lx %#lx\n", (unsigned long)r.sp, (unsigned long)top);
  fprintf(f, "bt");
  for (int i = 0; i < n; i++) fprintf(f, " %p", bt[i]);
  fprintf(f, "\n");
  FILE *m = fopen("/proc/self/maps", "r");
  if (!m) die("/proc/self/maps");
  char line[4096];
  while (fgets(line, sizeof line, m)) fprintf(f, "map %s", line);
  fclose(m);
  if (fclose(f) != 0) die(path);
  snprintf(path, sizeof path, "%s/%s.stack", out_dir, snap_name);
  f = fopen(path, "w");
  if (!f) die(path);
  // The frames above sp belong to snap's callers, which wait for this
  // function to return, so the bytes are the ones backtrace() just read.
  if (fwrite((void *)r.sp, 1, top - r.sp, f) != top - r.sp) die(path);
  if (fclose(f) != 0) die(path);
}

static void take(const char *name) {
  // snap_c unlocks once it has copied the registers; the lock keeps two
  // threads from sharing snap_regs.
  pthread_mutex_lock(&snap_lock);
  snap_name = name;
  snap();
}

// 1. qsort's comparator, called from inside libc.
static int cmp_calls;
static int cmp_int(const void *a, const void *b) {
  if (++cmp_calls == 5) take("qsort");
  return *(const int *)a - *(const int *)b;
}

// 2. an allocation in std::sort's comparator.
static std::atomic<int> sort_calls;
struct Cmp {
  bool operator()(int a, int b) const {
    if (++sort_calls == 7) {
      int *p = new int[a & 7 ? 3 : 5];
      p[0] = a;
      take("stdsort");
      delete[] p;
    }
    return a < b;
  }
};

// 3. deep recursion through frames of different sizes.
__attribute__((noinline)) int rec_b(int n, volatile char *prev);
__attribute__((noinline)) int rec_a(int n, volatile char *prev) {
  volatile char buf[40 + (1 << 5)];
  buf[0] = (char)n;
  if (n <= 0) {
    take("recursion");
    return buf[0] + (prev ? prev[0] : 0);
  }
  return rec_b(n - 1, buf) + buf[0];
}
__attribute__((noinline)) int rec_c(int n, volatile char *prev) {
  // A frame of over 64 KiB: a CFA offset the row's u16 holds only in units of 8.
  volatile char big[70000];
  big[0] = (char)n;
  big[69999] = prev ? prev[0] : 0;
  int r = rec_a(n - 1, big);
  return r + big[69999];
}
__attribute__((noinline)) int rec_b(int n, volatile char *prev) {
  volatile char *p = (volatile char *)__builtin_alloca(16 + n * 37);
  p[0] = (char)n;
  if (n > 0 && n % 5 == 0) return rec_c(n, p) + p[0];
  return rec_a(n - 1, p) + p[0] + (prev ? prev[0] : 0);
}

// 4. a signal handler, through libc's __restore_rt.
static void on_signal(int) { take("signal"); }
__attribute__((noinline)) static void raise_in(int depth) {
  volatile char pad[100];
  pad[0] = 0;
  if (depth == 0)
    raise(SIGUSR1);
  else
    raise_in(depth - 1);
  pad[1] = pad[0];
}

// 5. a new_handler called from libstdc++'s operator new.
static void on_no_memory() {
  take("newhandler");
  std::set_new_handler(nullptr);
}

// 6. a thread started by std::thread: libstdc++ and libc's start_thread.
__attribute__((noinline)) static void thread_body(int depth) {
  if (depth == 0)
    take("thread");
  else
    thread_body(depth - 1);
  asm volatile("" ::: "memory");
}

// 7. a frame with no CFI in between.
static void via_nocfi() { take("nocfi"); }
__attribute__((noinline)) static void call_nocfi(int depth) {
  if (depth == 0)
    nocfi_call(via_nocfi);
  else
    call_nocfi(depth - 1);
  asm volatile("" ::: "memory");
}

// 8. a call that is its function's last instruction (see noret_call).
[[noreturn]] static void noret_target() {
  take("noreturn");
  fflush(nullptr);
  _exit(0);
}
__attribute__((noinline)) static void call_noret(int depth) {
  if (depth == 0)
    noret_call(noret_target);
  else
    call_noret(depth - 1);
  asm volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: walk DIR\n");
    return 2;
  }
  out_dir = argv[1];

  int v[64];
  for (int i = 0; i < 64; i++) v[i] = (i * 7919) % 61;
  qsort(v, 64, sizeof v[0], cmp_int);

  std::vector<int> w(100);
  for (int i = 0; i < 100; i++) w[i] = (i * 31) % 97;
  std::sort(w.begin(), w.end(), Cmp());

  if (rec_a(23, nullptr) == 12345) puts("unlikely");

  signal(SIGUSR1, on_signal);
  raise_in(3);

  std::set_new_handler(on_no_memory);
  try {
    void *p = ::operator new((size_t)1 << 46);
    ::operator delete(p);
  } catch (const std::bad_alloc &) {
  }

  std::thread th(thread_body, 4);
  th.join();

  call_nocfi(2);

  call_noret(1);  // last: it exits
  return 1;
}
