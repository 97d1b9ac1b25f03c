package tests

// The stack oracle for the eBPF path (issue 12): the comparisons of
// stacks_dwarf_test.go, which the LD_PRELOAD path passes, applied to
// memtrace's own stacks, which the .eh_frame walk in BPF takes on code
// built without frame pointers (with the frame-pointer walk they stopped
// at frame #0: 0 of 1,181 matched).
//
//	go test ./tests -run Dwarf -v

import (
	"strconv"
	"testing"
)

// TestDwarfOracleBPF: every allocation's stack in an eBPF log equals the
// DWARF unwinder's record, in launch mode (plain, with a dlopen'ed library
// built without frame pointers, across an exec), in attach mode (the
// program waits for memtrace -p before it works), and in a --follow'ed
// forked child.
func TestDwarfOracleBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	exe := oracleBinary(t)
	depth := strconv.Itoa(oracleDepth)
	for _, sc := range oracleScenarios {
		mode, extra := "launch", []string(nil)
		if sc.name == "fork" {
			mode, extra = "follow", []string{"--follow"}
		}
		t.Run(mode+"/"+sc.name, func(t *testing.T) {
			for range dlopenRounds(sc.name == "dlopen") {
				r := newRun(t)
				args := append([]string{"--stack-depth", depth, "-o", r.log}, extra...)
				args = append(append(args, "--", exe), sc.args...)
				r.runMemtrace(t, memtrace, args)
				bpfLog(t, r.log)
				_, recs, byTID := checkOracle(t, r, oracleDepth, oracleThreads(sc.args))
				checkLibraryStacks(t, recs, byTID)
				if t.Failed() {
					return
				}
			}
		})
	}
	for _, dl := range []bool{false, true} {
		name := "attach/plain"
		if dl {
			name = "attach/dlopen"
		}
		t.Run(name, func(t *testing.T) {
			// runAttach passes neither memtrace nor the program
			// arguments: both read these from the environment.
			t.Setenv("MEMTRACE_STACK_DEPTH", depth)
			if dl {
				t.Setenv("UNWIND_ORACLE_DLOPEN", "1")
			}
			for range dlopenRounds(dl) {
				r := newRun(t)
				r.runAttach(t, memtrace, exe)
				bpfLog(t, r.log)
				_, recs, byTID := checkOracle(t, r, oracleDepth, 5)
				checkLibraryStacks(t, recs, byTID)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// dlopenRounds is how many times a dlopen scenario runs: its library's
// frames once came out in no file about one run in ten (the process had
// exited before its stacks were decoded, dd3488d), so it runs several
// times; the others once.
func dlopenRounds(dlopen bool) int {
	if dlopen {
		return rounds(5, 1)
	}
	return 1
}

// TestDwarfRootsBPF: on Debian's own sqlite3 (2,000 inserts in a
// transaction, read from standard input) and python3.11 (thousands of
// allocations), at least 99 % of the eBPF path's allocation stacks reach
// __libc_start_call_main, start_thread or clone3.
func TestDwarfRootsBPF(t *testing.T) {
	if testing.Short() {
		t.Skip("traces Debian's sqlite3 and python3.11 with 127-frame stacks: make test runs it")
	}
	requireBPF(t)
	for _, p := range debianPrograms(t) {
		t.Run(p.name, func(t *testing.T) {
			log := t.TempDir() + "/log"
			traceWithStdin(t, p.stdin, append([]string{"--stack-depth", "127", "-o", log, "--"}, p.args...)...)
			bpfLog(t, log)
			requireRootShare(t, log, p.name+" (bpf)")
		})
	}
}
