package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// endLog is one process with a 1000-byte block never freed, ended by
// end's lines (an exit line, or none).
func endLog(attach bool, end ...string) []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "50", "comm", "app", "mode", "bpf")
	if attach {
		l.meta(logfmt.WordProc, "event", "attach", "pid", "50", "comm", "app")
	}
	l.alloc(50, "app", "malloc", 10, 1000, 0x500, stackLeak...)
	if len(end) > 0 {
		l.meta(logfmt.WordProc, append([]string{"event", "exit", "pid", "50", "ts", "20"}, end...)...)
	}
	l.meta(logfmt.WordSummary, "events", "2", "lost", "0")
	return l.b
}

// TestRunEndAndStillAllocated: a process let go running (-p detach, a
// Ctrl-C) has blocks still allocated at detach, not leaks; one that exited
// has leaks; the summary says how the run ended, with the exit status or
// the signal the exit line carries.
func TestRunEndAndStillAllocated(t *testing.T) {
	for _, c := range []struct {
		name   string
		log    []byte
		end    string
		leaked bool
	}{
		{"exit 0", endLog(false, "status", "0"), "exited with status 0", true},
		{"exit 3", endLog(false, "status", "3"), "exited with status 3", true},
		{"signal", endLog(false, "signal", "SIGSEGV"), "killed by SIGSEGV", true},
		{"detach", endLog(true), "detached", false},
		{"interrupt", endLog(false), "interrupted", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := writeFile(t, "end.log", c.log)
			out, errs, code := runMain(t, "--resolve", "0", log)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			mustContain(t, out, "run: "+c.end+"\n")
			if c.leaked {
				mustContain(t, out, "MEMORY LEAKS\n1000B leaked over 1 calls from\nkeep()\n", "total memory leaked: 1000B (1 leaks)\n")
				if strings.Contains(out, "still allocated") {
					t.Errorf("an exited process's leaks called still allocated:\n%s", out)
				}
			} else {
				mustContain(t, out, stillTitle+"\n1000B still allocated over 1 calls from\nkeep()\n",
					"still allocated at detach: 1000B (1 blocks; not leaks: the process had not exited)\n")
				if strings.Contains(out, "MEMORY LEAKS") || strings.Contains(out, "total memory leaked") || strings.Contains(out, " leaked over ") {
					t.Errorf("blocks of a running process called leaks:\n%s", out)
				}
			}
			js, _, _ := runMain(t, "--resolve", "0", "--json", "-", log)
			var j jsonReport
			if err := json.Unmarshal([]byte(js), &j); err != nil {
				t.Fatal(err)
			}
			if j.Summary.RunEnd != c.end || j.Summary.StillAllocated == c.leaked || j.Summary.Leaks != 1 {
				t.Errorf("JSON summary run_end %q still_allocated %v leaks %d", j.Summary.RunEnd, j.Summary.StillAllocated, j.Summary.Leaks)
			}
		})
	}
}
