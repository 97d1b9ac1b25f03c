/* start_fmt: the library's start= formatter (put_start, c/text_fmt.c) for
 * each "seconds nanoseconds" line on stdin, one result a line, for
 * TestStartMatchesLogfmt. */
#include "text.h"

#include <stdio.h>

int main(void)
{
	long long s, ns;
	while (scanf("%lld %lld", &s, &ns) == 2) {
		struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)ns};
		char b[64], *o = put_start(b, &t);
		*o = 0;
		printf("%s\n", b);
	}
	return 0;
}
