// text_fmt.c: formatting, byte for byte what logfmt.AppendAlloc/AppendFree/
// AppendExit/AppendFrame/AppendMeta write (the fast integer helpers are
// inline in text.h).
#include "text.h"

const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
			  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
			  "8081828384858687888990919293949596979899";

// Several powers a row, not one a line.
// clang-format off
const uint64_t pow10_tab[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
	100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
	10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
	100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};
// clang-format on

static const char *const op_name[MT_NOPS] = {
#define OP_NAME_(name, num, text) [num] = text,
	MT_OPS(OP_NAME_)
#undef OP_NAME_
		[MT_OP_EXIT] = "EXIT",
};

char op_col[MT_NOPS][24];
unsigned char op_col_len[MT_NOPS];

void init_op_cols(void)
{
	for (int i = 0; i < MT_NOPS; i++) {
		if (!op_name[i])
			continue; // no op has this number
		char *o = op_col[i];
		size_t n = strlen(op_name[i]);
		o = put_s(o, op_name[i], n);
		while (n < 10) {
			*o++ = ' ';
			n++;
		}
		o = PUT_LIT(o, " ts=");
		op_col_len[i] = (unsigned char)(o - op_col[i]);
	}
}

// Meta lines ("[memtrace] WORD k=v"): values with odd bytes are quoted as
// logfmt quotes them, with strconv.Quote: its one-letter escapes, \xNN for
// any other control byte and for every byte from 0x7f (strconv.Quote keeps
// a printable UTF-8 character whole, which this does not).
static const char ctl_esc[32] = {
	['\a'] = 'a', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v'};

char *put_meta_val(char *o, char *end, const char *v)
{
	int q = !*v;
	for (const char *s = v; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c == '"' || c >= 0x7f || c == '\\')
			q = 1;
	}
	if (!q) {
		size_t n = strlen(v);
		if (n > (size_t)(end - o))
			n = (size_t)(end - o);
		return put_s(o, v, n);
	}
	*o++ = '"';
	for (const char *s = v; *s && end - o > 6; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c < ' ' && ctl_esc[c]) {
			*o++ = '\\';
			*o++ = ctl_esc[c];
		} else if (c < ' ' || c >= 0x7f) {
			static const char hx[] = "0123456789abcdef";
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hx[c >> 4];
			*o++ = hx[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o++ = '"';
	return o;
}

char *put_name15(char *o, const char *name)
{
	size_t n = strnlen(name, 15);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		*o++ = (c < ' ' || c == 0x7f) ? '?' : (char)c;
	}
	for (; n < 15; n++)
		*o++ = ' ';
	return o;
}

// put_0u writes v in exactly w digits, zeros in front.
static char *put_0u(char *o, uint64_t v, int w)
{
	for (int i = w - 1; i >= 0; i--) {
		o[i] = (char)('0' + v % 10);
		v /= 10;
	}
	return o + w;
}

char *put_start(char *o, const struct timespec *t)
{
	struct tm tm;
	time_t s = t->tv_sec;
	gmtime_r(&s, &tm);
	o = put_0u(o, (uint64_t)(tm.tm_year + 1900), 4);
	*o++ = '-';
	o = put_0u(o, (uint64_t)(tm.tm_mon + 1), 2);
	*o++ = '-';
	o = put_0u(o, (uint64_t)tm.tm_mday, 2);
	*o++ = 'T';
	o = put_0u(o, (uint64_t)tm.tm_hour, 2);
	*o++ = ':';
	o = put_0u(o, (uint64_t)tm.tm_min, 2);
	*o++ = ':';
	o = put_0u(o, (uint64_t)tm.tm_sec, 2);
	uint64_t ns = (uint64_t)t->tv_nsec;
	if (ns) {
		int w = 9;
		while (ns % 10 == 0) {
			ns /= 10;
			w--;
		}
		*o++ = '.';
		o = put_0u(o, ns, w);
	}
	*o++ = 'Z';
	return o;
}

char *kv_u(char *o, const char *k, uint64_t v)
{
	o = put_s(o, k, strlen(k));
	*o++ = '=';
	o = put_u(o, v);
	*o++ = ' ';
	return o;
}
