package ops

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// TestGeneratedFilesCurrent: every file generated from the table is what
// the table gives now (the BPF header, the preload library's header,
// logfmt's and the tracer's lists).
func TestGeneratedFilesCurrent(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./internal/ops", path)
		}
	}
}

// TestLogfmtIsTheTable: the compiled logfmt.Op numbers, texts and IsFree
// are the table's, and the numbers of the ops the preload records and
// the BPF objects carry never moved.
func TestLogfmtIsTheTable(t *testing.T) {
	if logfmt.NumOps != len(Ops)+1 {
		t.Fatalf("logfmt has %d ops, the table %d", logfmt.NumOps-1, len(Ops))
	}
	for i, o := range Ops {
		op := logfmt.Op(i + 1)
		if op.String() != o.Text || logfmt.ParseOp([]byte(o.Text)) != op || op.IsFree() != (o.Family == Free) {
			t.Errorf("op %d: logfmt says %q free=%v, the table %q %v", i+1, op, op.IsFree(), o.Text, o.Family)
		}
	}
	for text, num := range map[string]int{"malloc": 1, "pvalloc": 19, "mallocx": 20, "mi_realloc_aligned": 47} {
		if o, ok := ByText(text); !ok || Num(o.Go) != num {
			t.Errorf("%s is no longer op %d", text, num)
		}
	}
}

// TestCheckRefuses: the table's mistakes are found before anything is
// generated.
func TestCheckRefuses(t *testing.T) {
	ops, funcs := Ops, Funcs
	defer func() { Ops, Funcs = ops, funcs }()
	for name, c := range map[string]struct {
		ops   []Op
		funcs []Func
		want  string
	}{
		"same text":   {[]Op{{Go: "A", C: "A", Text: "a", Family: Alloc}, {Go: "B", C: "B", Text: "a", Family: Alloc}}, nil, "text:a is twice"},
		"long text":   {[]Op{{Go: "A", C: "A", Text: "an_allocation_function_x", Family: Alloc}}, nil, "op column"},
		"no family":   {[]Op{{Go: "A", C: "A", Text: "a"}}, nil, "lacks"},
		"unknown op":  {[]Op{{Go: "A", C: "A", Text: "a", Family: Alloc}}, []Func{{Symbol: "f", Op: "B", Set: Libc, Sig: "Size0", Probe: ProbeAlloc}}, "not in Ops"},
		"alias probe": {[]Op{{Go: "A", C: "A", Text: "a", Family: Alloc}}, []Func{{Symbol: "f", Op: "A", Set: Alias, Probe: ProbeFree}}, "alias"},
		"no sig":      {[]Op{{Go: "A", C: "A", Text: "a", Family: Alloc}}, []Func{{Symbol: "f", Op: "A", Set: Libc, Probe: ProbeAlloc}}, "signature"},
		"bad hook":    {[]Op{{Go: "A", C: "A", Text: "a", Family: Alloc}}, []Func{{Symbol: "f", Op: "A", Set: Libc, Sig: "Size0", Probe: ProbeAlloc, Hook: "(size_t n)"}}, "Hook"},
	} {
		Ops, Funcs = c.ops, c.funcs
		if _, err := Generate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one with %q", name, err, c.want)
		}
	}
}
