package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// poolLog leaks libstdc++'s emergency pool (its constructor unnamed, under
// the loader's _dl_init, as a real C++ run logs it), a glibc NSS block,
// and the program's own 100 bytes.
func poolLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "60", "comm", "app", "mode", "bpf")
	l.b = logfmt.AppendAlloc(l.b, 60, "app", "malloc", 1, 72704, 0, 0x1000)
	l.b = logfmt.AppendFrame(l.b, 0, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "", 0xa57ba, 0x7f00a57ba)
	l.b = logfmt.AppendFrame(l.b, 1, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "_dl_init", 0x12, 0x7f1000012)
	l.b = logfmt.AppendAlloc(l.b, 60, "app", "malloc", 2, 300, 0, 0x30000)
	l.b = logfmt.AppendFrame(l.b, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", "__nss_module_allocate", 0x40, 0x7f2000040)
	l.b = logfmt.AppendFrame(l.b, 1, "/nonexistent/app", "main", 0x20, 0x400020)
	l.alloc(60, "app", "malloc", 3, 100, 0x40000, stackLeak...)
	// A library's leak under _dl_init that is not libstdc++'s stays a leak.
	l.b = logfmt.AppendAlloc(l.b, 60, "app", "malloc", 4, 50, 0, 0x50000)
	l.b = logfmt.AppendFrame(l.b, 0, "/opt/libmine.so", "mine_init", 0x10, 0x7f3000010)
	l.b = logfmt.AppendFrame(l.b, 1, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "_dl_init", 0x12, 0x7f1000012)
	l.meta(logfmt.WordProc, "event", "exit", "pid", "60", "ts", "5", "status", "0")
	l.meta(logfmt.WordSummary, "events", "4", "lost", "0")
	return l.b
}

// TestBuiltinSuppressions: the built-in list takes libstdc++'s pool and
// glibc's NSS block out of the leaks and counts them; --print-suppressions
// lists what they matched; --disable-builtin-suppressions puts them back.
func TestBuiltinSuppressions(t *testing.T) {
	log := writeFile(t, "pool.log", poolLog())
	out, errs, code := runMain(t, "--resolve", "0", "-a", "0", "-p", "0", "-T", "0", "--print-suppressions", log)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out,
		"MEMORY LEAKS\n100B leaked over 1 calls from\nkeep()\n",
		"50B leaked over 1 calls from\nmine_init\n",
		"total memory leaked: 150B (2 leaks)\n  of which malloc family 150B (2 blocks), mmap 0B (0 mappings)\nsuppressed leaks: 73.00K (2 leaks)\n",
		"leak:_dl_init (allocated in libstdc++.so*)  (built-in: libstdc++'s emergency exception pool and other start-up state, allocated by its constructors) matched 1 leaks, 72.70K, in 1 call stacks\n",
		"leak:__nss_  (built-in: glibc's name service modules and databases) matched 1 leaks, 300B, in 1 call stacks\n",
		"suppressed in total: 73.00K (2 leaks)\n",
	)
	if leaks := out[strings.Index(out, "MEMORY LEAKS"):strings.Index(out, "total runtime")]; strings.Contains(leaks, "libstdc++") || strings.Contains(leaks, "__nss_") {
		t.Errorf("a suppressed block is still ranked:\n%s", leaks)
	}
	js, _, _ := runMain(t, "--resolve", "0", "--json", "-", log)
	var j jsonReport
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	if j.Summary.SuppressedLeaks != 2 || j.Summary.SuppressedBytes != 73004 || len(j.Suppressions) != 2 || !j.Suppressions[0].Builtin {
		t.Errorf("JSON suppressed %d/%d, suppressions %+v", j.Summary.SuppressedLeaks, j.Summary.SuppressedBytes, j.Suppressions)
	}

	out, _, _ = runMain(t, "--resolve", "0", "-a", "0", "-p", "0", "-T", "0", "--disable-builtin-suppressions", "--print-suppressions", log)
	mustContain(t, out, "MEMORY LEAKS\n72.70K leaked over 1 calls from\nlibstdc++.so.6.0.30+0xa57ba\n", "total memory leaked: 73.15K (4 leaks)\n", "(none: --suppressions FILE adds some; the built-in ones are off)")
	if strings.Contains(out, "suppressed leaks") {
		t.Errorf("suppressed with the built-in list off:\n%s", out)
	}
}
