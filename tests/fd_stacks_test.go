package tests

import (
	"bufio"
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// fdTruthMap is one line of /proc/self/maps as fdstack recorded it.
type fdTruthMap struct {
	start, end, off uint64
	path            string
}

// readFDTruth reads fdstack's record: per fd, the backtrace() addresses,
// and the mappings they lie in.
func readFDTruth(t *testing.T, path string) (map[int64][]uint64, []fdTruthMap) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the truth: %v", err)
	}
	opens := map[int64][]uint64{}
	var maps []fdTruthMap
	inMaps := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "maps":
			inMaps = true
		case inMaps:
			if len(f) < 6 {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			s, _ := strconv.ParseUint(lo, 16, 64)
			e, _ := strconv.ParseUint(hi, 16, 64)
			o, _ := strconv.ParseUint(f[2], 16, 64)
			maps = append(maps, fdTruthMap{s, e, o, f[5]})
		case f[0] == "open" && len(f) > 2:
			fd, _ := strconv.ParseInt(f[1], 10, 64)
			for _, a := range f[2:] {
				v, err := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
				if err != nil {
					t.Fatalf("truth address %q: %v", a, err)
				}
				opens[fd] = append(opens[fd], v)
			}
		}
	}
	return opens, maps
}

// truthName names a return address through the file it lies in.
func truthName(t *testing.T, c *symbols.Cache, maps []fdTruthMap, addr uint64) string {
	t.Helper()
	for _, m := range maps {
		if addr < m.start || addr >= m.end {
			continue
		}
		foff := addr - m.start + m.off
		ef, err := elf.Open(m.path)
		if err != nil {
			t.Fatalf("open %s: %v", m.path, err)
		}
		defer ef.Close()
		for _, p := range ef.Progs {
			if p.Type == elf.PT_LOAD && foff >= p.Off && foff < p.Off+p.Filesz {
				mod, err := c.Open(m.path)
				if err != nil {
					t.Fatalf("symbols of %s: %v", m.path, err)
				}
				fr, err := mod.Resolve(foff-p.Off+p.Vaddr-1, 0)
				if err != nil || fr.Symbol == "" {
					t.Fatalf("no symbol for truth address %#x in %s: %v", addr, m.path, err)
				}
				return fr.Symbol
			}
		}
	}
	t.Fatalf("truth address %#x in no mapping", addr)
	return ""
}

// TestFDStacksMatchBacktrace: a program built -O2 -fomit-frame-pointer
// opens /etc/passwd through fopen in a function main calls; with --track
// fd --stack-depth 16 each open's stack= must be the DWARF walk's, equal
// to glibc's backtrace() frame for frame from that function down to
// _start (the frame-pointer walk gave one unnamed frame), and the
// --report-dir file must list the leaked descriptor with that stack.
func TestFDStacksMatchBacktrace(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	dir := t.TempDir()
	bin := filepath.Join(dir, "fdstack")
	src := filepath.Join(repoRoot(t), "tests/fdprogs/fdstack.c")
	if out, err := command("gcc", "-O2", "-fomit-frame-pointer", "-g", "-Wall", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	logPath, truthPath, rep := filepath.Join(dir, "run.log"), filepath.Join(dir, "truth"), filepath.Join(dir, "reports")
	cmd := command(mt, "--track", "fd", "--stack-depth", "16", "--report-dir", rep, "-o", logPath, "--", bin)
	cmd.Env = append(os.Environ(), "FDTRUTH="+truthPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, out)
	}
	log := bpfLog(t, logPath)
	opens, maps := readFDTruth(t, truthPath)
	if len(opens) != 2 {
		t.Fatalf("the truth has %d opens, want 2", len(opens))
	}
	c := symbols.NewCache(nil)
	defer c.Close()
	want := map[int64][]string{}
	for fd, addrs := range opens {
		for _, a := range addrs {
			want[fd] = append(want[fd], truthName(t, c, maps, a))
		}
	}
	var leakStack string
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(string(log)))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, logfmt.TracePrefix+logfmt.WordFD+" ")
		if !ok {
			continue
		}
		r, err := logfmt.ParseFD([]byte(logfmt.WordFD), []byte(rest))
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		if r.Path != "/etc/passwd" || (r.Event != logfmt.FDOpen && r.Event != logfmt.FDLeak) {
			continue
		}
		w := want[r.FD]
		if w == nil {
			t.Fatalf("fd %d is not in the truth: %s", r.FD, line)
		}
		got := strings.Split(r.Stack, " < ")
		i := 0
		for i < len(got) && got[i] != w[0] {
			i++
		}
		if i == 0 || i == len(got) {
			t.Fatalf("fd %d: stack %q: want libc's frames, then %s", r.FD, r.Stack, w[0])
		}
		if strings.Join(got[i:], " < ") != strings.Join(w, " < ") {
			t.Errorf("fd %d: stack from %s on:\n  got  %s\n  want %s (backtrace)", r.FD, w[0], strings.Join(got[i:], " < "), strings.Join(w, " < "))
		}
		if r.Event == logfmt.FDLeak {
			leakStack = r.Stack
		} else {
			seen++
		}
	}
	if seen != 2 || leakStack == "" {
		t.Fatalf("%d opens of /etc/passwd and leak stack %q in the log, want 2 and one leak:\n%s", seen, leakStack, log)
	}
	txts, _ := filepath.Glob(filepath.Join(rep, "*.txt"))
	if len(txts) != 1 {
		t.Fatalf("%d report files, want 1", len(txts))
	}
	b, err := os.ReadFile(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "/etc/passwd\n      "+leakStack+"\n") {
		t.Errorf("the report does not list the leaked descriptor with its stack %q:\n%s", leakStack, b)
	}
}
