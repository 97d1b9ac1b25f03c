package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/report"
)

// memview on a file without a single log line says what the report says,
// in one line, and exits 1 before it opens the screen.
func TestNotALogOneLine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"random.bin", random},
		{"output.txt", []byte("hello\nworld\n[memtrack] tid=oops\n")},
		{"empty.log", nil},
	}
	for _, c := range cases {
		p := writeTemp(t, c.name, c.data)
		out, errs, code := runBin(t, p)
		if code != 1 || out != "" {
			t.Fatalf("%s: exit %d, stdout %q", c.name, code, out)
		}
		if n := strings.Count(errs, "\n"); n != 1 {
			t.Fatalf("%s: %d lines on stderr: %q", c.name, n, errs)
		}
		var rep, rerr bytes.Buffer
		if c.name == "random.bin" {
			// Binary: both refuse it in the same line.
			if code := report.Main([]string{"--resolve", "0", p}, &rep, &rerr); code != 1 || rep.Len() != 0 ||
				!strings.Contains(errs, "not a log: its first bytes are binary") || !strings.Contains(rerr.String(), "not a log: its first bytes are binary") {
				t.Fatalf("%s: report exit %d %q, memview %q", c.name, code, rerr.String(), errs)
			}
			continue
		}
		// The report refuses it in memview's words (analysis.NotLog),
		// quoting none of the file.
		if code := report.Main([]string{"--resolve", "0", p}, &rep, &rerr); code != 1 || rep.Len() != 0 {
			t.Fatalf("%s: report exit %d: %s", c.name, code, rerr.String())
		}
		want := strings.TrimPrefix(strings.TrimSpace(rerr.String()), "memtrace report: ")
		if !strings.HasPrefix(errs, "memview: "+want) || !strings.Contains(want, c.name+" is ") || strings.Contains(errs, "hello") {
			t.Fatalf("%s: memview says %q, the report %q", c.name, errs, want)
		}
	}
	// A log after some program output is a log: memview goes on to need
	// a terminal (none here), it does not refuse the file.
	p := writeTemp(t, "mixed.log", append([]byte("program output\n"), sampleLog()...))
	if _, errs, code := runBin(t, p); code != 1 || !strings.Contains(errs, "memview needs a terminal") {
		t.Fatalf("mixed log: exit %d %q", code, errs)
	}
}

// memview -f LOG: ● LIVE while the file grows, ✕ DONE once memtrace's
// summary line is in it.
func TestTmuxFollowFileDoneAtSummary(t *testing.T) {
	open := sampleLog()
	open = open[:bytes.Index(open, []byte("[memtrace] summary"))]
	p := writeTemp(t, "live.log", open)
	tm := newTerm(t, bin+" -f "+p)
	tm.waitFor("● LIVE", "4 allocs")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(logfmt.AppendAlloc(nil, 1, "main", "malloc", 20, 64, 204, 0x5000))
	tm.waitFor("● LIVE", "5 allocs")
	// The exit line first: a summary without it is an interrupted run,
	// whose blocks are still allocated at detach, not leaks.
	f.Write(logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcExit, PID: 4321, TS: 21, HasStatus: true}))
	f.Write(logfmt.AppendMeta(nil, logfmt.WordSummary, logfmt.KV{Key: "events", Value: "8"}, logfmt.KV{Key: "lost", Value: "3"}))
	f.Close()
	tm.waitFor("✕ DONE", "5 allocs", "Leaks: ≤3")
	tm.send("q")
	tm.waitGone()
}

// A live source that shows nothing parseable says so in the title.
func TestTmuxStdinNotALog(t *testing.T) {
	p := writeTemp(t, "junk.txt", []byte("just\nsome\nlines\n"))
	tm := newTerm(t, "(cat "+p+"; sleep 30) | "+bin+" -f -")
	tm.waitFor("● LIVE", "3 lines, no log line (is it a memtrace or memtrack log?)")
	// The session ends with the pipeline's sleep; Cleanup kills it.
}
