package tests

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// reportSrc does what the report must find: 100 temporaries in make_tmp
// (the largest 163 bytes), three 1000-byte leaks in leak_it, and a 1 MiB
// block from hold_big that is live at the peak and freed afterwards.
const reportSrc = `#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *leak_it(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void make_tmp(int i) { char *p = malloc(64 + i); p[0] = 1; __asm__ volatile("" ::"r"(p)); free(p); }
__attribute__((noinline)) void *hold_big(void) { void *p = malloc(1 << 20); memset(p, 2, 1 << 20); return p; }
int main(void) {
	for (int i = 0; i < 100; i++) make_tmp(i);
	for (int i = 0; i < 3; i++) leak_it(1000);
	void *big = hold_big();
	free(big);
	return 0;
}
`

// TestReportOfATracedProgram traces a real program (the LD_PRELOAD path:
// no root needed) with stacks, then checks memtrace report's rankings
// against what the program did, with names and source lines looked up in
// the binary (its frames are logged without names: no -rdynamic).
func TestReportOfATracedProgram(t *testing.T) {
	bin := buildC(t, "reportprog", reportSrc, "-g", "-fno-omit-frame-pointer")
	log := filepath.Join(t.TempDir(), "prog.log")
	if code, _, se := memtraceRun(t, nil, "--preload", "--stack-depth", "16", "-o", log, "--", bin); code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	code, out, se := memtraceRun(t, nil, "report", "--print-largest", "--json", "-", log)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, se)
	}
	type frame struct {
		Function string `json:"function"`
		File     string `json:"file"`
	}
	type entry struct {
		Calls       int64   `json:"calls"`
		Temporary   int64   `json:"temporary"`
		PeakBytes   int64   `json:"peak_bytes"`
		Leaks       int64   `json:"leaks"`
		LeakedBytes int64   `json:"leaked_bytes"`
		Largest     *int64  `json:"largest_bytes"` // in the largest ranking's entries alone
		Stack       []frame `json:"stack"`
	}
	var j struct {
		entry
		Rankings struct{ Calls, Peak, Leaks, Temporary, Largest []entry } `json:"rankings"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	top := func(list []entry, what string) entry {
		t.Helper()
		if len(list) == 0 || len(list[0].Stack) == 0 {
			t.Fatalf("%s: empty ranking\n%s", what, out)
		}
		return list[0]
	}
	src := filepath.Base(filepath.Dir(bin)) + "/reportprog.c"
	check := func(e entry, fn string) {
		t.Helper()
		if e.Stack[0].Function != fn || !strings.HasSuffix(e.Stack[0].File, src) {
			t.Errorf("want %s at %s first, got %+v", fn, src, e.Stack[0])
		}
	}
	if e := top(j.Rankings.Leaks, "leaks"); e.Leaks != 3 || e.LeakedBytes != 3000 {
		t.Errorf("top leak %+v", e)
	} else {
		check(e, "leak_it")
	}
	if e := top(j.Rankings.Peak, "peak"); e.PeakBytes != 1<<20 {
		t.Errorf("top peak %+v", e)
	} else {
		check(e, "hold_big")
	}
	if e := top(j.Rankings.Temporary, "temporary"); e.Temporary != 100 || e.Calls != 100 {
		t.Errorf("top temporary %+v", e)
	} else {
		check(e, "make_tmp")
	}
	// The largest single allocation of each call stack: hold_big's one
	// block, leak_it's 1000 bytes, make_tmp's last and largest, 64 + 99.
	if e := top(j.Rankings.Largest, "largest"); e.Largest == nil || *e.Largest != 1<<20 {
		t.Errorf("top largest %+v", e)
	} else {
		check(e, "hold_big")
	}
	largest := map[string]int64{}
	for _, e := range j.Rankings.Largest {
		if len(e.Stack) > 0 && e.Largest != nil {
			largest[e.Stack[0].Function] = *e.Largest
		}
	}
	if largest["leak_it"] != 1000 || largest["make_tmp"] != 163 {
		t.Errorf("largest by function %v", largest)
	}
	if len(j.Rankings.Calls) == 0 || j.Rankings.Calls[0].Largest != nil {
		t.Errorf("the calls ranking carries largest_bytes: %+v", j.Rankings.Calls)
	}
	if j.PeakBytes < 1<<20 || j.Leaks < 3 || j.LeakedBytes < 3000 || j.Temporary < 100 || j.Calls < 104 {
		t.Errorf("totals %+v", j)
	}
}
