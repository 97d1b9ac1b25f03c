package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/report"
)

// deepC allocates once from main (a whole stack: main is called by libc's
// start code) and once at the bottom of a 20-deep recursion, which
// --stack-depth 8 cuts.
const deepC = `
#include <stdlib.h>
static void *volatile sink;
__attribute__((noinline)) void leaf(void) { sink = malloc(777); }
__attribute__((noinline)) void deep(int n) { if (n == 0) leaf(); else deep(n - 1); sink = 0; }
int main(void) {
	sink = malloc(333);
	deep(20);
	return 0;
}
`

// A stack cut by --stack-depth reaches both readers marked, and a whole
// one does not.
func TestReadersTruncatedStacksEndToEnd(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	dir := t.TempDir()
	src, prog, logPath := filepath.Join(dir, "deep.c"), filepath.Join(dir, "deep"), filepath.Join(dir, "run.log")
	if err := os.WriteFile(src, []byte(deepC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command("gcc", "-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := command(memtrace, "--stack-depth", "8", "-o", logPath, "--", prog)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := runCmd(t, cmd, time.Minute); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	b := bpfLog(t, logPath)
	m := analysis.New()
	if err := m.ReadAll(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	var leafID, mainID = -1, -1
	for i := range m.TS {
		switch m.Size[i] {
		case 777:
			leafID = i
		case 333:
			mainID = i
		}
	}
	if leafID < 0 || mainID < 0 {
		t.Fatalf("the program's allocations are not in the log:\n%s", b)
	}
	if r := m.StackTruncation(m.Stack[leafID]); r != "depth" {
		t.Fatalf("the 20-deep stack: truncation %q, want depth; frames %d", r, len(m.Frames(m.Stack[leafID])))
	}
	if r := m.StackTruncation(m.Stack[mainID]); r != "" {
		t.Fatalf("main's stack marked %q:\n%s", r, b)
	}

	var out, errs bytes.Buffer
	if code := report.Main([]string{"--resolve", "0", "--json", "-", logPath}, &out, &errs); code != 0 {
		t.Fatalf("report: %d %s", code, errs.String())
	}
	type reason struct {
		Reason string
		Stacks int64
	}
	var j struct {
		Summary struct {
			TruncatedStacks struct {
				Stacks  int64
				Reasons []reason
			} `json:"truncated_stacks"`
		}
		Rankings struct {
			Calls []struct {
				Stack []struct {
					Function string
				}
				Truncated []string
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.Summary.TruncatedStacks.Stacks < 1 || !slices.ContainsFunc(j.Summary.TruncatedStacks.Reasons, func(r reason) bool { return r.Reason == "depth" }) {
		t.Fatalf("JSON truncated_stacks %+v", j.Summary.TruncatedStacks)
	}
	seen := 0
	for _, e := range j.Rankings.Calls {
		if len(e.Stack) == 0 {
			continue
		}
		switch e.Stack[0].Function {
		case "leaf":
			seen++
			if !slices.Contains(e.Truncated, "depth") {
				t.Errorf("leaf's entry not marked: %+v", e.Truncated)
			}
		case "main":
			seen++
			if len(e.Truncated) != 0 {
				t.Errorf("main's entry marked %v", e.Truncated)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of the two call sites in the ranking:\n%s", seen, out.String())
	}
	out.Reset()
	report.Main([]string{"--resolve", "0", logPath}, &out, &errs)
	if !strings.Contains(out.String(), "… [truncated: depth]") || !strings.Contains(out.String(), "truncated call stacks: ") {
		t.Fatalf("text report:\n%s", out.String())
	}
}
