/* Built twice by TestDebugFrameEqualsEhFrame: once with .eh_frame, once
   with only .debug_frame (-fno-asynchronous-unwind-tables -g). The code is
   the same, so the tables must be too. */
#ifdef BOTH
/* Both sections for the same functions (with -fno-toplevel-reorder): the
   table must use .eh_frame and drop every .debug_frame FDE. */
asm(".cfi_sections .eh_frame, .debug_frame");
#endif
#include <alloca.h>
#include <string.h>

int sink(volatile char *p, int n);

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }

__attribute__((noinline)) int small_frame(int x) {
  volatile char b[24];
  b[0] = (char)x;
  return sink(b, 24) + leaf(x);
}

__attribute__((noinline)) int big_frame(int x) {
  volatile char b[5000];
  memset((char *)b, x, sizeof b);
  return sink(b, (int)sizeof b);
}

__attribute__((noinline)) int dynamic_frame(int n) {
  volatile char *p = alloca(n + 16);
  p[0] = (char)n;
  return sink(p, n) + small_frame(n);
}

__attribute__((noinline)) int many_saved(int a, int b, int c, int d) {
  int r = 0;
  for (int i = 0; i < a; i++) r += sink((volatile char *)&r, i) * b + c * leaf(d + i);
  return r + big_frame(a) + dynamic_frame(b);
}

int sink(volatile char *p, int n) { return p[0] + n; }

int main(int argc, char **argv) {
  (void)argv;
  return many_saved(argc, 2, 3, 4) & 1;
}
