package cli

import (
	"flag"
	"strings"
	"testing"
)

func TestUsageGNUStyle(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var follow bool
	fs.String("o", "", "write the log to `FILE`")
	fs.BoolVar(&follow, "follow", false, "trace children")
	fs.BoolVar(&follow, "f", false, "short for --follow")
	fs.Int("stack-depth", 0, "capture `N` frames")
	fs.String("track", "malloc,mmap", "what to trace: `LIST`")
	var b strings.Builder
	Usage(&b, fs)
	out := b.String()
	for _, want := range []string{"-f, --follow", "-o FILE", "--stack-depth N", "--track LIST", "(default malloc,mmap)"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"\n  -follow", "\n  -stack-depth", "short for", "(default 0)", "(default false)"} {
		if strings.Contains(out, bad) {
			t.Errorf("usage has %q:\n%s", bad, out)
		}
	}
	// One line per option: the alias is folded, not listed.
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("%d lines, want 4:\n%s", n, out)
	}
}

func TestPrintVersion(t *testing.T) {
	var b strings.Builder
	PrintVersion(&b, "memview")
	if b.String() != "memview "+Version+"\n" {
		t.Fatalf("got %q", b.String())
	}
}
