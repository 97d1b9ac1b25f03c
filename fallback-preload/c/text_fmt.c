// text_fmt.c: formatting, byte for byte what logfmt.AppendAlloc/AppendFree/
// AppendExit/AppendFrame/AppendMeta write (the fast integer helpers are
// inline in text.h).
#include "text.h"

const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

const uint64_t pow10_tab[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
	100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
	10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
	100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

static const char *const op_name[MT_NOPS] = {
#define OP_NAME_(name, num, text) [num] = text,
	MT_OPS(OP_NAME_)
#undef OP_NAME_
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

// Meta lines ("[memtrace] WORD k=v"): values are quoted as Go's
// strconv.Quote would read them back when they hold odd bytes.
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
		} else if (c == '\n') {
			o = PUT_LIT(o, "\\n");
		} else if (c == '\t') {
			o = PUT_LIT(o, "\\t");
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

char *kv_u(char *o, const char *k, uint64_t v)
{
	o = put_s(o, k, strlen(k));
	*o++ = '=';
	o = put_u(o, v);
	*o++ = ' ';
	return o;
}
