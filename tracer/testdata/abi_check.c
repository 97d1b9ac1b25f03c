/* abi_check: bpf/memtrace.h's bit layouts as the BPF programs apply them,
 * compiled for the host, so that tracer/abi_test.go can hold the Go side
 * against the C macros themselves rather than against a copy of their
 * numbers. One request per line on stdin, one answer per line on stdout:
 *   cookie C                          -> op sig delta before after, as the
 *                                        programs read them (MT_CK)
 *   pack OP PTR SIZE KIND FLAGS TID TS -> fits, then the 24 bytes of the
 *                                        mt_event_packed as send_packed
 *                                        fills it, in hex
 *   hold PID KIND SEQ                 -> the hold map's key, MT_HOLD_KEY, and
 *                                        the pid the release sweeps take
 *                                        from it
 * Numbers are hexadecimal.
 */
#include <linux/types.h>
#include <stdio.h>
#include <string.h>

#include "memtrace.h"

int main(void)
{
	char line[512];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long long c, op, ptr, size, kind, flags, tid, ts;
		if (sscanf(line, "cookie %llx", &c) == 1) {
			/* As do_free and direct_internal_call read it, or
			 * called_from_module. */
			if (MT_CK(c, SIG) == MT_SIG_FREE_CHECKED)
				printf("%llx %llx %llx %llx %llx\n", MT_CK(c, OP), MT_CK(c, SIG), MT_CK(c, FREE_DELTA),
				       MT_CK(c, FREE_BEFORE), MT_CK(c, FREE_AFTER));
			else
				printf("%llx %llx 0 %llx %llx\n", MT_CK(c, OP), MT_CK(c, SIG), MT_CK(c, BEFORE),
				       MT_CK(c, AFTER));
		} else if (sscanf(line, "pack %llx %llx %llx %llx %llx %llx %llx", &op, &ptr, &size, &kind, &flags,
				  &tid, &ts) == 7) {
			struct mt_event_packed e = {
				.op_ptr = MT_PK_OP_PTR(op, ptr),
				.ts_ns = ts,
				.size_tid = MT_PK_SIZE_TID(size, kind, flags, tid),
			};
			unsigned char b[sizeof e];
			memcpy(b, &e, sizeof e);
			printf("%d ", MT_PK_FITS(ptr, size, flags) ? 1 : 0);
			for (size_t i = 0; i < sizeof b; i++)
				printf("%02x", b[i]);
			printf("\n");
		} else if (sscanf(line, "hold %llx %llx %llx", &tid, &kind, &c) == 3) {
			__u32 key = MT_HOLD_KEY(tid, kind, c);
			printf("%x %x\n", key, key & MT_HOLD_PID_MASK);
		} else {
			printf("?\n");
		}
		fflush(stdout);
	}
	return 0;
}
