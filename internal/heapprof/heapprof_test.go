package heapprof

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/symbols"
)

// fixture is a C program whose leaking function inlines the helper that
// calls malloc: its one frame is two functions, two source lines.
const fixture = `#include <stdlib.h>
void *volatile sink;
static inline __attribute__((always_inline)) void *make_block(unsigned long n)
{
	return malloc(n);
}
__attribute__((noinline)) void *leak_here(unsigned long n)
{
	void *p = make_block(n);
	sink = p;
	return p;
}
int main(void) { return leak_here(100) == 0; }
`

// bias is where the fixture (PIE) is pretended to be loaded.
const bias = 0x555555554000

// fixtureFrames builds the fixture and returns the return address of its
// malloc call as the agent names it, with the malloc call's line.
func fixtureFrames(t *testing.T) (exe string, frames []Frame) {
	dir := t.TempDir()
	exe = filepath.Join(dir, "leaky")
	src := filepath.Join(dir, "leaky.c")
	if err := os.WriteFile(src, []byte(fixture), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-g", "-fno-builtin", "-pie", "-fPIE", "-Wl,--build-id", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	// The instruction after leak_here's call (a tail call is a jmp: -O2
	// with "return p" after a use keeps it a call here).
	var fn uint64
	in := false
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "<leak_here>:") {
			fn, _ = strconv.ParseUint(strings.Fields(l)[0], 16, 64)
			in = true
			continue
		}
		if in && strings.Contains(l, "call") && strings.Contains(l, "malloc") {
			next := strings.TrimSpace(lines[i+1])
			ret, err := strconv.ParseUint(strings.TrimSuffix(strings.Fields(next)[0], ":"), 16, 64)
			if err != nil {
				t.Fatalf("objdump line %q", next)
			}
			return exe, []Frame{{Module: exe, Symbol: "leak_here", Offset: ret - fn, Addr: bias + ret}}
		}
	}
	t.Fatalf("no malloc call in leak_here:\n%s", out)
	return "", nil
}

func TestRealAddressesMappingsAndLines(t *testing.T) {
	c := symbols.NewCache(nil)
	exe, stack := fixtureFrames(t)
	samples := []Sample{
		{PID: 7, Stack: stack, AllocObjects: 3, AllocBytes: 300, InuseObjects: 1, InuseBytes: 100},
		{PID: 7, NoStack: "malloc", AllocObjects: 2, AllocBytes: 20},
	}
	var buf bytes.Buffer
	if err := Write(&buf, samples, &Options{Symbols: c}); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" || p.DefaultSampleType != "inuse_space" {
		t.Fatalf("sample types %s, default %q", got, p.DefaultSampleType)
	}
	if len(p.Mapping) == 0 || p.Mapping[0].File != exe {
		t.Fatalf("first mapping %+v, want %s", p.Mapping, exe)
	}
	mod, _ := c.Open(exe)
	if m := p.Mapping[0]; m.BuildID != mod.BuildID() || m.BuildID == "" || m.Start == 0 || m.Limit <= m.Start {
		t.Fatalf("mapping %+v, build ID %q", m, mod.BuildID())
	}
	var leaky *profile.Location
	for _, s := range p.Sample {
		if s.Value[3] != 100 {
			continue
		}
		for _, l := range s.Location {
			if l.Address == 0 || l.Mapping == nil || l.Address < l.Mapping.Start || l.Address >= l.Mapping.Limit {
				t.Fatalf("location %#x outside its mapping %+v", l.Address, l.Mapping)
			}
			leaky = l
		}
	}
	if leaky == nil {
		t.Fatalf("no sample of 100 live bytes:\n%s", p)
	}
	// Inlined: make_block at the malloc call (line 5), inside leak_here
	// at make_block's call (line 9).
	var got []string
	for _, ln := range leaky.Line {
		got = append(got, ln.Function.Name+" "+filepath.Base(ln.Function.Filename)+":"+strconv.FormatInt(ln.Line, 10))
	}
	if strings.Join(got, ", ") != "make_block leaky.c:5, leak_here leaky.c:9" {
		t.Fatalf("lines %v", got)
	}
	if leaky.Address != stack[0].Addr-1 || leaky.Mapping.Start-leaky.Mapping.Offset != bias {
		t.Fatalf("address %#x (frame %#x), mapping %+v", leaky.Address, stack[0].Addr, leaky.Mapping)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		bpftest.Unavailable(t, "the go command is not on PATH: cannot run go tool pprof")
	}
	pf := filepath.Join(t.TempDir(), "p.pb.gz")
	os.WriteFile(pf, buf.Bytes(), 0o644)
	for _, args := range [][]string{{"-top", "-lines"}, {"-traces"}, {"-raw"}} {
		cmd := exec.Command(goTool, append(append([]string{"tool", "pprof", "-symbolize=none"}, args...), pf)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof %v: %v\n%s", args, err, out)
		}
		s := string(out)
		switch args[0] {
		case "-top":
			if !regexp.MustCompile(`(?m)^\s+100B\s+100%\s+100%\s+100B\s+100%\s+make_block \S+/leaky.c:5 \(inline\)$`).MatchString(s) ||
				!regexp.MustCompile(`leak_here \S+/leaky.c:9`).MatchString(s) || !strings.Contains(s, "Type: inuse_space") || !strings.Contains(s, "File: leaky") {
				t.Fatalf("-top -lines:\n%s", s)
			}
		case "-traces":
			if !strings.Contains(s, "make_block") || !strings.Contains(s, "leak_here") || !strings.Contains(s, "100B") {
				t.Fatalf("-traces:\n%s", s)
			}
		case "-raw":
			if !regexp.MustCompile(`leak_here \S+/leaky.c:9`).MatchString(s) || !strings.Contains(s, strconv.FormatUint(leaky.Address, 16)) || !strings.Contains(s, mod.BuildID()) {
				t.Fatalf("-raw lacks the address %#x, the line or the build ID:\n%s", leaky.Address, s)
			}
		}
	}
}

func TestPeakTypesAndLabels(t *testing.T) {
	samples := []Sample{
		{PID: 1, Process: "a", Stack: []Frame{{Module: "/nonexistent/a", Symbol: "_Z3foov", Offset: 5, Addr: 0x1005}}, AllocObjects: 1, AllocBytes: 10, PeakObjects: 1, PeakBytes: 10},
		{PID: 2, Process: "b", Stack: []Frame{{Module: "/nonexistent/a", Symbol: "_Z3foov", Offset: 5, Addr: 0x2005}}, AllocObjects: 2, AllocBytes: 20, InuseObjects: 2, InuseBytes: 20},
		{PID: 2, Process: "b", Stack: []Frame{{Symbol: ""}}}, // all zero: left out
	}
	p, err := Build(samples, &Options{Peak: true, PIDLabel: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SampleType) != 6 || p.SampleType[5].Type != "peak_space" || p.SampleType[4].Type != "peak_objects" {
		t.Fatalf("types %v", p.SampleType)
	}
	if len(p.Sample) != 2 {
		t.Fatalf("%d samples, want 2 (the empty one left out)", len(p.Sample))
	}
	for _, s := range p.Sample {
		// String labels: Parca and Pyroscope read no numeric ones.
		if len(s.NumLabel) != 0 || len(s.Label["pid"]) != 1 {
			t.Fatalf("sample %v labels %v %v: want the pid a string label", s.Value, s.NumLabel, s.Label)
		}
		pid, _ := strconv.ParseInt(s.Label["pid"][0], 10, 64)
		if (pid == 1) != (s.Label["process"][0] == "a") || (pid == 1) != (s.Value[5] == 10) {
			t.Fatalf("sample %v labels %v", s.Value, s.Label)
		}
		if s.Location[0].Line[0].Function.Name != "foo()" || s.Location[0].Address != uint64(pid)<<12+4 {
			t.Fatalf("location %+v", s.Location[0])
		}
	}
	// One mapping per process: the same file at other addresses.
	if len(p.Mapping) != 2 {
		t.Fatalf("mappings %v", p.Mapping)
	}
}

// TestWriteTextReadByPprof: Go's text heap format with what only memtrace
// writes (a sample without a stack, a sampled period, labels) reads back in
// pprof's legacy parser to the same figures, unscaled.
func TestWriteTextReadByPprof(t *testing.T) {
	samples := []Sample{
		{PID: 7, Process: "a", Stack: []Frame{{Module: "/nonexistent/a", Symbol: "_Z3foov", Offset: 5, Addr: 0x1005}}, AllocObjects: 3, AllocBytes: 300, InuseObjects: 1, InuseBytes: 100},
		{PID: 7, Process: "a", NoStack: "malloc", AllocObjects: 2, AllocBytes: 64, InuseObjects: 2, InuseBytes: 64},
	}
	p, err := Build(samples, &Options{PIDLabel: true, Period: 512 << 10, Comments: []string{"two\nlines"}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"heap profile: 3: 164 [5: 364] @ heap/2\n", "1: 100 [3: 300] @ 0x1005\n", "2: 64 [2: 64] @\n",
		`# labels: {"pid":"7", "process":"a"}`, "[no stack] malloc", "# two lines\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("text lacks %q:\n%s", want, text)
		}
	}
	lp, err := profile.ParseData(b.Bytes())
	if err != nil {
		t.Fatalf("pprof cannot read it: %v\n%s", err, text)
	}
	var got [4]int64
	for _, s := range lp.Sample {
		for k := range got {
			got[k] += s.Value[k]
		}
	}
	if got != [4]int64{5, 364, 3, 164} {
		t.Fatalf("pprof reads %v:\n%s", got, text)
	}
	if err := WriteText(&b, &profile.Profile{SampleType: []*profile.ValueType{{Type: "space", Unit: "bytes"}}}); err == nil {
		t.Fatal("a profile without Go's heap sample types was written")
	}
}
