package bpftest

import (
	"bytes"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// RequireModeBPF fails t unless log, a whole memtrace log, starts with a
// header saying mode=bpf. Every test of the eBPF path calls it: memtrace
// falls back to LD_PRELOAD where BPF is unavailable, and a test whose
// checks the fallback also passes would otherwise pass without ever
// running the eBPF tracer (--stack-threads with --stack-depth did, for as
// long as its programs failed to load).
func RequireModeBPF(t testing.TB, log []byte) {
	t.Helper()
	sc := logfmt.NewScanner(bytes.NewReader(log))
	var l logfmt.Line
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil || l.Kind != logfmt.KindMeta || string(l.Word) != logfmt.WordHeader {
			continue
		}
		// Another field that does not parse leaves mode= read.
		if h, _ := logfmt.ParseHeader(l.Rest); h.Mode != logfmt.ModeBPF {
			t.Fatalf("the log's header says mode=%q, want mode=bpf (memtrace fell back from the eBPF tracer): %s", h.Mode, sc.Line())
		}
		return
	}
	t.Fatalf("the log (%d bytes) has no [memtrace] header line, so nothing shows it came from the eBPF tracer", len(log))
}
