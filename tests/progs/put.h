/*
 * put.h: number formatting for the test programs' records (truth.h,
 * unwind_truth.h). Recording never allocates, so no printf: digits are
 * written by hand into the caller's buffer.
 */
#ifndef PUT_H
#define PUT_H

#include <stdint.h>

static inline char *put_u(char *o, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

/* put_hex writes v as 0x-prefixed lower-case hex. */
static inline char *put_hex(char *o, uint64_t v)
{
	static const char hx[] = "0123456789abcdef";
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = hx[v & 15];
		v >>= 4;
	} while (v);
	*o++ = '0';
	*o++ = 'x';
	while (n)
		*o++ = tmp[--n];
	return o;
}

#endif
