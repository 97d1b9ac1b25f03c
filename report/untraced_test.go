package report

import (
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// untracedLog: a --follow run where one child could not be probed.
func untracedLog(untraced bool) []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "5"}, logfmt.KV{Key: "mode", Value: "bpf"})
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", 10, 64, 64, 0x1000)
	b = logfmt.AppendMeta(b, logfmt.WordProc, logfmt.KV{Key: "event", Value: "fork"}, logfmt.KV{Key: "pid", Value: "7"}, logfmt.KV{Key: "ppid", Value: "5"})
	if untraced {
		b = logfmt.AppendMeta(b, logfmt.WordProc, logfmt.KV{Key: "event", Value: "untraced"}, logfmt.KV{Key: "pid", Value: "7"},
			logfmt.KV{Key: "reason", Value: "too many open files"})
	}
	b = logfmt.AppendFree(b, 5, "main", "free", 20, 64, 0x1000)
	return b
}

func TestUntracedProcessesReported(t *testing.T) {
	text, j, html := reportAll(t, writeFile(t, "u.log", untracedLog(true)))
	want := "1 processes not traced (their allocations are not in the log): 7: too many open files"
	mustContain(t, text, want)
	mustContain(t, html, "<th>untraced processes</th>", "too many open files")
	if len(j.Summary.Untraced) != 1 || !strings.Contains(j.Summary.Untraced[0], "7: too many open files") {
		t.Fatalf("JSON untraced_processes = %q", j.Summary.Untraced)
	}
	text, j, _ = reportAll(t, writeFile(t, "t.log", untracedLog(false)))
	if strings.Contains(text, "not traced") || len(j.Summary.Untraced) != 0 {
		t.Fatalf("a fully traced run reports untraced processes:\n%s", text)
	}
}
