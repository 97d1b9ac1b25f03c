package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memview-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "memview")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build memview: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sampleLog: two threads, one leak per thread, one cross-thread free after
// the allocating thread exited (not a leak), a lost line.
func sampleLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "4321"}, logfmt.KV{Key: "comm", Value: "sample"}, logfmt.KV{Key: "cmd", Value: "./sample"})
	b = logfmt.AppendAlloc(b, 1, "main", "malloc", 10, 100, 100, 0x1000)
	b = logfmt.AppendFrame(b, 0, "./sample", "_ZN6sample4leakEv", 0x10, 0x401010)
	b = logfmt.AppendAlloc(b, 2, "worker", "new", 11, 200, 200, 0x2000)
	b = logfmt.AppendAlloc(b, 2, "worker", "malloc", 12, 300, 500, 0x3000)
	b = logfmt.AppendExit(b, 2, "worker", 13, 500)
	b = logfmt.AppendFree(b, 1, "main", "delete", 14, 200, 0x2000)
	b = logfmt.AppendAlloc(b, 1, "main", "calloc", 15, 40, 140, 0x4000)
	b = logfmt.AppendFree(b, 1, "main", "free", 16, 40, 0x4000)
	b = logfmt.AppendMeta(b, logfmt.WordLost, logfmt.KV{Key: "count", Value: "3"}, logfmt.KV{Key: "total", Value: "3"})
	// The tracer's last line: a log without it was cut short.
	b = logfmt.AppendSummary(b, logfmt.Summary{Lost: 3})
	return b
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runBin(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestDumpThreads(t *testing.T) {
	p := writeTemp(t, "s.log", sampleLog())
	out, errs, code := runBin(t, "--dump-threads", p)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	// Thread TID Allocs Allocated Frees Freed Net Leaks Leaked
	if w := rows["worker"]; w == nil || w[2] != "2" || w[3] != "500" || w[4] != "1" || w[7] != "1" || w[8] != "300" {
		t.Fatalf("worker row %q\n%s", w, out)
	}
	if m := rows["main"]; m == nil || m[7] != "1" || m[8] != "100" {
		t.Fatalf("main row %q", m)
	}
	if tot := rows["TOTAL"]; tot == nil || tot[1] != "4" || tot[6] != "2" || tot[7] != "400" {
		t.Fatalf("total row %q", tot)
	}
	if !strings.Contains(out, "3 events LOST") {
		t.Fatalf("lost events not reported:\n%s", out)
	}
	// Stdin works too.
	cmd := exec.Command(bin, "--dump-threads", "-")
	cmd.Stdin = bytes.NewReader(sampleLog())
	o2, err := cmd.Output()
	if err != nil || string(o2) != out {
		t.Fatalf("stdin: %v\n%s", err, o2)
	}
}

func TestDumpThreadsGarbage(t *testing.T) {
	junk := []byte("some text\n\x01\x02 binary\n[memtrack] tid=1 (x\n" + strings.Repeat("z", 2<<20) + "\n[memtrack] tid=9      (t              ) malloc     ts=5 size=1")
	p := writeTemp(t, "junk.log", junk)
	// No line of it is a log line: not a log, in one line that quotes
	// none of it, exit 1 (docs/cli.md), no table.
	out, errs, code := runBin(t, "--dump-threads", p)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "memview: junk.log is not a memtrace or memtrack log") ||
		strings.Contains(errs, "some text") {
		t.Fatalf("exit %d: stdout %q, stderr %q", code, out, errs)
	}
}

func TestBadArguments(t *testing.T) {
	dir := t.TempDir()
	existing := writeTemp(t, "kept.log", []byte("precious\n"))
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{filepath.Join(dir, "missing.log")}, 1, "memview: open the log:"},
		{[]string{"--dump-threads", dir}, 1, "is a directory"},
		{[]string{"--bogus"}, 2, "unknown option '--bogus' (see memview --help)"},
		{[]string{"--dump-thread", "x.log"}, 2, "unknown option '--dump-thread'; did you mean '--dump-threads'?"},
		{[]string{"--save=x", "-"}, 1, "only applies to a TCP stream"},
		{[]string{}, 2, "no log given"},
		{[]string{"-f"}, 2, "option '-f' requires an argument LOG"},
		{[]string{"a.log", "b.log"}, 2, "more than one log"},
		{[]string{"127.0.0.1:1"}, 1, "memview needs a terminal"}, // no terminal here: checked before connecting
		{[]string{"x.log", "-o", "y.log"}, 1, "only applies to a TCP stream"},
		{[]string{"127.0.0.1:1", "-o", existing}, 1, "exists: remove it"},
	}
	for _, c := range cases {
		_, errs, code := runBin(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.msg)
		}
		if first := strings.SplitN(errs, "\n", 2)[0]; !strings.HasPrefix(first, "memview: ") {
			t.Errorf("%q: first stderr line %q", c.args, first)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "precious\n" {
		t.Fatalf("-o overwrote an existing file: %q", b)
	}
	if out, _, code := runBin(t, "--help"); code != 0 || !strings.Contains(out, "--dump-threads") {
		t.Fatalf("--help: %d %q", code, out)
	}
}

func TestLineTeeDropsPartialLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "save.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	lt := &lineTee{f: f}
	for _, chunk := range []string{"one\ntw", "o\nthr", "ee\nfour-no-newline"} {
		lt.Write([]byte(chunk))
	}
	f.Close()
	got, _ := os.ReadFile(p)
	if string(got) != "one\ntwo\nthree\n" {
		t.Fatalf("saved %q", got)
	}
}

// serveOnce listens on a free local port and streams data to the first
// client, then closes (as memtrace --port and memtrack.so do).
func serveOnce(t *testing.T, data []byte, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		half := len(data) / 2
		c.Write(data[:half])
		time.Sleep(delay)
		c.Write(data[half:])
	}()
	return ln.Addr().String()
}

// TestDumpThreadsFIFO: a FIFO is read as cat reads it once a log line
// came, however long its writer then stalls; one that sends no log line is
// refused in words that are true of what it sent: how many lines came
// within the second it is given, or that it ended after them.
func TestDumpThreadsFIFO(t *testing.T) {
	log := sampleLog()
	head := 0
	for range 3 {
		head += bytes.IndexByte(log[head:], '\n') + 1
	}
	// A gzip member of its first 3 lines, sent whole: a reader that
	// looks for the next member before it passes those lines on holds
	// them back until the writer sends more.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(log[:head])
	zw.Close()
	for _, c := range []struct {
		name  string
		write func(w *os.File)
		code  int
		want  string
	}{
		{"3 log lines, a stall, the rest", func(w *os.File) {
			w.Write(log[:head])
			time.Sleep(1500 * time.Millisecond)
			w.Write(log[head:])
		}, 0, "TOTAL"},
		{"a gzip member of 3 log lines, a stall", func(w *os.File) {
			w.Write(gz.Bytes())
			time.Sleep(1500 * time.Millisecond)
		}, 0, "3 lines, "},
		{"3 other lines, ended", func(w *os.File) { w.Write([]byte("one line\nanother line\na third line\n")) },
			1, "fifo is not a memtrace or memtrack log: none of its 3 lines read is a log line"},
		{"3 other lines, a stall", func(w *os.File) {
			w.Write([]byte("one line\nanother line\na third line\n"))
			time.Sleep(1500 * time.Millisecond)
		}, 1, "none of the 3 lines it sent in its first 1s is a memtrace or memtrack line"},
		{"nothing, a stall", func(w *os.File) { time.Sleep(1500 * time.Millisecond) },
			1, "no memtrace or memtrack line came within 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer w.Close()
				c.write(w)
			}()
			out, errs, code := runBin(t, "--dump-threads", fifo)
			if code != c.code || !strings.Contains(out+errs, c.want) || c.code != 0 && strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errs, c.code, c.want)
			}
		})
	}
}
