package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
)

// compressedLog is data as memtrace -o FILE.zst (or .gz) writes it: one
// block per Write of each piece.
func compressedLog(t *testing.T, k logio.Kind, pieces ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := logio.NewWriter(&b, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pieces {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decompressed(t *testing.T, path string) ([]byte, logio.Kind, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := logio.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k, _ := r.Kind()
	b, err := io.ReadAll(r)
	return b, k, err
}

// TestDumpThreadsCompressed: --dump-threads prints the plain log's table
// for its zstd and gzip forms, from a file and from stdin; of a cut one it
// prints what was read and says the log ends early.
func TestDumpThreadsCompressed(t *testing.T) {
	want, _, code := runBin(t, "--dump-threads", writeTemp(t, "s.log", sampleLog()))
	if code != 0 || !strings.Contains(want, "TOTAL") {
		t.Fatalf("plain: exit %d\n%s", code, want)
	}
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		z := compressedLog(t, k, sampleLog())
		out, errs, code := runBin(t, "--dump-threads", writeTemp(t, "s.log."+k.String(), z))
		if code != 0 || errs != "" || out != want {
			t.Errorf("%v: exit %d, stderr %q\n%s\nwant\n%s", k, code, errs, out, want)
		}
		cmd := exec.Command(bin, "--dump-threads", "-")
		cmd.Stdin = bytes.NewReader(z)
		if o, err := cmd.Output(); err != nil || string(o) != want {
			t.Errorf("%v on stdin: %v\n%s", k, err, o)
		}
		// Cut after the first of two blocks: the first thread's lines.
		log := sampleLog()
		i := bytes.Index(log, []byte("(worker"))
		i = bytes.LastIndexByte(log[:i], '\n') + 1
		var first bytes.Buffer
		w, _ := logio.NewWriter(&first, k, 0)
		w.Write(log[:i])
		out, errs, code = runBin(t, "--dump-threads", writeTemp(t, "cut.log", first.Bytes()))
		if code != 1 || !strings.Contains(errs, "ends early") || !strings.Contains(errs, "at byte ") || !strings.Contains(out, "main") || strings.Contains(out, "worker") ||
			!strings.Contains(out, "blocks live at the cut, not leaks") {
			t.Errorf("%v cut: exit %d, stderr %q\n%s", k, code, errs, out)
		}
	}
}

// TestTmuxCompressedFile: memview FILE.zst and FILE.gz show what the plain
// log shows; a cut one shows what was read and says it ends early.
func TestTmuxCompressedFile(t *testing.T) {
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		p := writeTemp(t, "s.log."+k.String(), compressedLog(t, k, sampleLog()))
		tm := newTerm(t, bin+" "+p)
		tm.waitFor("✕ DONE", "4 allocs", "4 shown", "pid 4321 ./sample", "Lost: 3", "Leaks: ≤2  (400B)")
		tm.send("q")
		tm.waitGone()
	}
	log := sampleLog()
	var first bytes.Buffer
	w, _ := logio.NewWriter(&first, logio.Zstd, 0)
	w.Write(log[:bytes.Index(log, []byte("[memtrack] tid=2"))])
	p := writeTemp(t, "cut.zst", first.Bytes())
	// A short name leaves the title room for the reason.
	tm := newTerm(t, "cd "+filepath.Dir(p)+" && "+bin+" cut.zst")
	tm.waitFor("✕ DONE", "1 allocs", "compressed log ends early (cut)")
	tm.send("q")
	tm.waitGone()
}

// TestTmuxFollowCompressed: memview -f FILE.zst (and .gz) shows each block
// as it is appended, waits for a block that is only partly there (no
// error, nothing skipped), and is done at the summary.
func TestTmuxFollowCompressed(t *testing.T) {
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			p := writeTemp(t, "live.log."+k.String(), nil)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tm := newTerm(t, bin+" -f "+p)
			tm.waitFor("● LIVE", "0 allocs", "Follow: ON")
			var z bytes.Buffer
			w, err := logio.NewWriter(&z, k, 0)
			if err != nil {
				t.Fatal(err)
			}
			sent := 0
			// appendNew appends what the writer added since the last call,
			// in two parts with a pause between when split.
			appendNew := func(split bool) {
				b := z.Bytes()[sent:]
				sent = z.Len()
				if split && len(b) > 4 {
					f.Write(b[:len(b)/2])
					time.Sleep(400 * time.Millisecond)
					b = b[len(b)/2:]
				}
				f.Write(b)
			}
			for step := 1; step <= 3; step++ {
				var b []byte
				for i := 0; i < 50; i++ {
					n := (step-1)*50 + i
					b = logfmt.AppendAlloc(b, 7, "grower", "malloc", uint64(100+n), 64, uint64(64*(n+1)), uint64(0x9000+n*0x40))
				}
				w.Write(b)
				appendNew(step == 2)
				tm.waitFor("● LIVE", strconv.Itoa(50*step)+" allocs", "grower")
				if s := tm.screen(); strings.Contains(s, "Skipped") || strings.Contains(s, "ends early") || strings.Contains(s, "damaged") {
					t.Fatalf("step %d: a block in two parts was taken for bad data:\n%s", step, s)
				}
			}
			w.Write(logfmt.AppendMeta(nil, logfmt.WordSummary, logfmt.KV{Key: "events", Value: "150"}))
			w.Close()
			appendNew(false)
			tm.waitFor("✕ DONE", "150 allocs")
			tm.send("q")
			tm.waitGone()
		})
	}
}

// TestTmuxStdinCompressed: a compressed log piped in is decompressed
// (cat FILE.zst | memview -f -), and zstdcat's output of it is the plain
// log memtrack's own memview reads the same way.
func TestTmuxStdinCompressed(t *testing.T) {
	z := writeTemp(t, "s.log.zst", compressedLog(t, logio.Zstd, sampleLog()[:200], sampleLog()[200:]))
	cmds := []string{"cat " + z + " | " + bin + " -f -"}
	if _, err := exec.LookPath("zstdcat"); err == nil {
		out, err := exec.Command("zstdcat", z).Output()
		if err != nil || !bytes.Equal(out, sampleLog()) {
			t.Fatalf("zstdcat gives %d bytes (%v), not the plain log", len(out), err)
		}
		cmds = append(cmds, "zstdcat "+z+" | "+bin+" -f -")
	} else {
		t.Errorf("zstdcat is not installed (make deps installs zstd)")
	}
	for _, c := range cmds {
		tm := newTerm(t, c)
		tm.waitFor("✕ DONE", "stdin", "4 allocs", "Leaks: ≤2")
		tm.send("Escape")
		tm.waitGone()
	}
}

// TestTmuxTCPSaveCompressed: -o save.zst of a TCP stream saves the
// stream's complete lines compressed.
func TestTmuxTCPSaveCompressed(t *testing.T) {
	data := sampleLog()
	cut := append(append([]byte(nil), data...), "[memtrack] tid=1      (main           ) mall"...)
	for _, name := range []string{"save.log.zst", "save.log.gz"} {
		addr := serveOnce(t, cut, 300*time.Millisecond)
		save := filepath.Join(t.TempDir(), name)
		tm := newTerm(t, bin+" "+addr+" -o "+save)
		tm.waitFor("✕ DONE", "4 allocs", "Lost: 3")
		tm.send("q")
		tm.waitGone()
		got, kind, err := decompressed(t, save)
		if err != nil || kind != logio.KindOf(name) {
			t.Fatalf("%s: a %v file, %v", name, kind, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: saved log differs from the complete lines streamed:\n%q", name, got)
		}
		if out, _, code := runBin(t, "--dump-threads", save); code != 0 || !strings.Contains(out, "TOTAL") {
			t.Fatalf("replay of %s: %d\n%s", name, code, out)
		}
	}
}
