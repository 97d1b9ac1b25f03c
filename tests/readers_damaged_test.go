package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
)

// damageLog is a memtrace log of a run that exited: a few hundred
// allocations with stacks, a tenth of them leaked.
func damageLog() []byte {
	var b []byte
	b = logfmt.AppendHeader(b, logfmt.Header{Version: "t", PID: 60, Comm: "app", Cmd: "./app", Mode: "bpf"})
	b = logfmt.AppendThread(b, logfmt.Thread{TID: 60, PID: 60, Name: "app"})
	for i := uint64(0); i < 3000; i++ {
		b = logfmt.AppendAlloc(b, 60, "app", "malloc", 2*i+1, 64, 0, 0x10000+i*64)
		b = logfmt.AppendFrame(b, 0, "./app", "work", i%97, 0x401000+i%97)
		b = logfmt.AppendFrame(b, 1, "./app", "main", 0x20, 0x402020)
		if i%10 != 0 {
			b = logfmt.AppendFree(b, 60, "app", "free", 2*i+2, 64, 0x10000+i*64)
		}
	}
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 60, TS: 7000, HasStatus: true})
	b = logfmt.AppendSummary(b, logfmt.Summary{Events: 5700, Allocs: 3000, Frees: 2700, DurationUS: 7000})
	return b
}

// compressLog is log in form k, as memtrace -o FILE.zst writes it: a
// block end at each Write.
func compressLog(t *testing.T, log []byte, k logio.Kind) []byte {
	t.Helper()
	var z bytes.Buffer
	w, err := logio.NewWriter(&z, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	for len(log) > 0 {
		n := min(len(log), 16<<10)
		if _, err := w.Write(log[:n]); err != nil {
			t.Fatal(err)
		}
		log = log[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// readers runs each reader on path: the report and memview --dump-threads,
// which print, and memview's viewer, which refuses before it opens the
// screen or goes on to want a terminal (none here).
type readerRun struct {
	name               string
	stdout, stderr     string
	code               int
	took               time.Duration
	wantsTerminalAfter bool
}

func runReaders(t *testing.T, path string) []readerRun {
	t.Helper()
	var out []readerRun
	for i := range readers {
		out = append(out, runReader(t, path, i))
	}
	return out
}

// readers are the three ways a log is read.
var readers = []struct {
	name string
	bin  string
	args []string
}{
	{"memtrace report", "bin/memtrace", []string{"report", "--resolve", "0"}},
	{"memview --dump-threads", "bin/memview", []string{"--dump-threads"}},
	{"memview", "bin/memview", nil},
}

// runReader runs readers[i] over path.
func runReader(t *testing.T, path string, i int) readerRun {
	t.Helper()
	c := readers[i]
	cmd := command(need(t, c.bin), append(append([]string{}, c.args...), path)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	t0 := time.Now()
	err := runCmd(t, cmd, 20*time.Second)
	r := readerRun{name: c.name, stdout: so.String(), stderr: se.String(), took: time.Since(t0)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", c.name, path, err)
	}
	r.wantsTerminalAfter = strings.Contains(r.stderr, "memview needs a terminal")
	return r
}

// refuseCap tells a refusal from a reader that waits for more input: the
// inputs below never end (or end long after), and the readers give up by
// their own clock (a second without a first line) or after the first MB.
// It is far above that clock, so that a loaded machine's slow start of
// the reader is not taken for a hang.
const refuseCap = 15 * time.Second

// TestDamagedCompressedLogs: a bit flipped in the middle of a .zst or .gz
// log, or the file cut in the middle: the report and the thread table
// print what was read, say where and why the reading stopped, and exit 1;
// the cut run's blocks are live at the cut, not leaks.
func TestDamagedCompressedLogs(t *testing.T) {
	log := damageLog()
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		z := compressLog(t, log, k)
		flipped := append([]byte{}, z...)
		flipped[len(z)/2] ^= 0x10
		for _, c := range []struct {
			name, why string
			data      []byte
			cut       bool
		}{
			{"flipped", "damaged", flipped, false},
			{"cut", "ends early", z[:len(z)/2], true},
		} {
			path := filepath.Join(t.TempDir(), "run.log."+k.String())
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, r := range runReaders(t, path)[:2] {
				what := k.String() + " " + c.name + ": " + r.name
				if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.why) ||
					!strings.Contains(r.stderr, "stopped after line ") || !strings.Contains(r.stderr, "at byte ") {
					t.Errorf("%s: exit %d, stderr %q; want 1 and one line saying why and where", what, r.code, r.stderr)
				}
				if !strings.Contains(r.stdout, "calls to allocation functions: ") && !strings.Contains(r.stdout, "TOTAL ") {
					t.Errorf("%s: nothing of what was read printed:\n%s", what, r.stdout)
				}
				if c.cut && !strings.Contains(r.stdout, "live at the cut") {
					t.Errorf("%s: the blocks at the cut are not live at the cut:\n%s", what, r.stdout)
				}
				if c.cut && strings.Contains(r.stdout, "MEMORY LEAKS") {
					t.Errorf("%s: a cut log's blocks reported as leaks:\n%s", what, r.stdout)
				}
			}
		}
	}
}

// TestNotALogRefused: binary first bytes (a damaged magic number
// included) and devices are refused by every reader in one line, exit 1,
// at once; a FIFO that sends no log line within a second is refused
// within two.
func TestNotALogRefused(t *testing.T) {
	log := damageLog()
	var inputs []struct{ name, path string }
	add := func(name string, data []byte) {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, struct{ name, path string }{name, p})
	}
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		z := compressLog(t, log, k)
		z[0] ^= 0x01
		add("magic-"+k.String(), z)
	}
	add("binary", bytes.Repeat([]byte{0x00, 0x9f, 0x13, 0xc7}, 1000))
	inputs = append(inputs, struct{ name, path string }{"/dev/zero", "/dev/zero"}, struct{ name, path string }{"/dev/urandom", "/dev/urandom"})
	for _, in := range inputs {
		for _, r := range runReaders(t, in.path) {
			if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "not a log") || r.took > refuseCap {
				t.Errorf("%s, %s: exit %d after %v, stdout %q, stderr %q; want one line refusing it without waiting for more", in.name, r.name, r.code, r.took, r.stdout, r.stderr)
			}
		}
	}

	// FIFOs: no writer, a writer that sends nothing, one that sends
	// random bytes, one that sends text; each writer goes on until the
	// reader is done, so a refusal cannot come from an end of input.
	for _, c := range []struct {
		name   string
		writer func(w *os.File, stop <-chan struct{})
	}{
		{"no writer", nil},
		{"silent writer", func(w *os.File, stop <-chan struct{}) { <-stop }},
		{"random bytes", func(w *os.File, stop <-chan struct{}) {
			f, _ := os.Open("/dev/urandom")
			defer f.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := io.CopyN(w, f, 64<<10); err != nil {
					return
				}
			}
		}},
		{"text forever", func(w *os.File, stop <-chan struct{}) {
			line := bytes.Repeat([]byte("y\n"), 4096)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}},
	} {
		for reader := range readers {
			// In parallel: each case waits up to the readers' second.
			t.Run(fmt.Sprintf("fifo/%s/%d", c.name, reader), func(t *testing.T) {
				t.Parallel()
				fifo := filepath.Join(t.TempDir(), "fifo")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				done, stop := make(chan struct{}), make(chan struct{})
				// The writer has the FIFO open before the reader starts
				// (a writer's open waiting in a goroutine could come
				// after the reader saw no writer, an empty FIFO): a read
				// end of the test's own makes its open return at once,
				// and stays open until the reader is done, so that the
				// writer's first bytes wait for the reader as before.
				var hold *os.File
				if c.writer != nil {
					var err error
					if hold, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil {
						t.Fatal(err)
					}
					w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					go func() {
						defer close(done)
						defer w.Close()
						c.writer(w, stop)
					}()
				} else {
					close(done)
				}
				r := runReader(t, fifo, reader)
				close(stop)
				if hold != nil {
					// A writer blocked on a full FIFO gets EPIPE now.
					hold.Close()
				}
				// Nobody writing it, the FIFO ends at once: empty, not
				// silent for a second.
				want := "not a log"
				if c.writer == nil {
					want = "fifo is empty: not a memtrace or memtrack log"
				}
				if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) || r.took > refuseCap {
					t.Errorf("FIFO, %s, %s: exit %d after %v, stdout %q, stderr %q; want one line refusing it without waiting for more", c.name, r.name, r.code, r.took, r.stdout, r.stderr)
				}
				// Unblock a writer that waits for a reader.
				if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("FIFO, %s: the writer did not end", c.name)
				}
			})
		}
	}
}

// TestLiveLogsStillRead: a FIFO or stdin whose log starts late (memtrace
// still attaching) is read: stdin waits as long as it takes, a FIFO whose
// first line comes within the second too, compressed or not.
func TestLiveLogsStillRead(t *testing.T) {
	log := damageLog()
	// Every case waits on a clock of its own, so they run side by side.
	for _, data := range [][]byte{log, compressLog(t, log, logio.Zstd)} {
		for _, args := range [][]string{{"bin/memtrace", "report", "--resolve", "0", "-"}, {"bin/memview", "--dump-threads", "-"}} {
			t.Run(fmt.Sprintf("stdin/%s/%d", filepath.Base(args[0]), len(data)), func(t *testing.T) {
				t.Parallel()
				cmd := command(need(t, args[0]), args[1:]...)
				w, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				var so, se bytes.Buffer
				cmd.Stdout, cmd.Stderr = &so, &se
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(1500 * time.Millisecond)
				w.Write(data)
				w.Close()
				if err := runWait(cmd, 20*time.Second); err != nil || !strings.Contains(so.String(), "TOTAL") && !strings.Contains(so.String(), "total memory leaked: 19.20K (300 leaks)") {
					t.Errorf("%v on a late stdin: %v %s\n%s", args, err, se.String(), so.String())
				}
			})
		}
		t.Run(fmt.Sprintf("fifo/%d", len(data)), func(t *testing.T) {
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
				time.Sleep(300 * time.Millisecond)
				w.Write(data)
			}()
			cmd := command(need(t, "bin/memtrace"), "report", "--resolve", "0", fifo)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "total memory leaked: 19.20K (300 leaks)") {
				t.Errorf("report of a FIFO: %v\n%s", err, out)
			}
		})
	}
}
