package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTemporariesProgram traces tests/progs/temporaries (docs/temporaries.md)
// on both paths and checks memtrace's temporary allocations: 100 alone, the
// 1000 second blocks of the pairs, the 10 of get's temporary path, and
// get's entry counting both its paths' 20 allocations.
func TestTemporariesProgram(t *testing.T) {
	exe := filepath.Join(need(t, "tests/progs/build"), "temporaries")
	for _, mode := range []string{"bpf", "preload"} {
		t.Run(mode, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "tmp.log")
			args := []string{"--stack-depth", "16", "-o", log, "--", exe}
			if mode == "bpf" {
				requireBPF(t)
			} else {
				args = append([]string{"--preload"}, args...)
			}
			if code, _, se := memtraceRun(t, nil, args...); code != 0 {
				t.Fatalf("memtrace exit %d: %s", code, se)
			}
			if mode == "bpf" {
				bpfLog(t, log)
			}
			code, out, se := memtraceRun(t, nil, "report", "-a", "0", "-p", "0", "-l", "0", log)
			if code != 0 {
				t.Fatalf("report exit %d: %s", code, se)
			}
			for _, want := range []string{
				"temporary memory allocations: 1110 ",
				"1000 temporary allocations of 2000 allocations in total (50.00%) from\npairs\n",
				"100 temporary allocations of 100 allocations in total (100.00%) from\nalone\n",
				"10 temporary allocations of 20 allocations in total (50.00%) from\nget\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("report lacks %q\n%s", want, out)
				}
			}
			// The stacks end at main: no start-up frame is shown.
			if strings.Contains(out, "__libc_start_main") || strings.Contains(out, "_start\n") {
				t.Errorf("start-up frames shown:\n%s", out)
			}
		})
	}
}
