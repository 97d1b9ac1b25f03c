package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/logio"
)

// compressed returns data written by memtrace's own compressed writer.
func compressed(t *testing.T, data []byte, k logio.Kind) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := logio.NewWriter(&b, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two writes: two blocks, so that a cut after the first is at a
	// flush, as a killed memtrace leaves it.
	half := len(data) / 2
	if _, err := w.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCompressedLogs: a zstd or gzip log gives the plain log's report
// exactly (text and JSON), from a file and from stdin; a cut one is read
// up to the cut and says so (exit 0); a damaged or xz one is one line,
// exit 1.
func TestCompressedLogs(t *testing.T) {
	known := knownLog()
	plainDir := t.TempDir()
	plain := filepath.Join(plainDir, "run.log")
	os.WriteFile(plain, known, 0o644)
	wantText, errs, code := runMain(t, plain, "--json", filepath.Join(plainDir, "j"))
	if code != 0 || errs != "" {
		t.Fatalf("plain log: exit %d, %q", code, errs)
	}
	wantJSON, _ := os.ReadFile(filepath.Join(plainDir, "j"))
	for _, k := range []logio.Kind{logio.Zstd, logio.Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			z := compressed(t, known, k)
			dir := t.TempDir()
			// The same name as the plain log: the report names it.
			p := filepath.Join(dir, "run.log")
			os.WriteFile(p, z, 0o644)
			out, errs, code := runMain(t, p, "--json", filepath.Join(dir, "j"))
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if out != wantText {
				t.Errorf("the report of the %v log differs from the plain log's:\n%s\n--- plain ---\n%s", k, out, wantText)
			}
			// The JSON names the log by its path.
			if j, _ := os.ReadFile(filepath.Join(dir, "j")); !bytes.Equal(bytes.ReplaceAll(j, []byte(p), []byte(plain)), wantJSON) {
				t.Errorf("the JSON of the %v log differs from the plain log's:\n%s\n%s", k, j, wantJSON)
			}

			// Cut after the first block.
			var first bytes.Buffer
			w, _ := logio.NewWriter(&first, k, 0)
			w.Write(known[:len(known)/2])
			cut := filepath.Join(dir, "cut.log")
			os.WriteFile(cut, first.Bytes(), 0o644)
			out, errs, code = runMain(t, cut, "--json", filepath.Join(dir, "jc"))
			// What came before the cut is reported, then the cut said
			// with where it is, and exit 1.
			if code != 1 || !strings.Contains(errs, "ends early") || !strings.Contains(errs, "at byte ") || strings.Count(errs, "\n") != 1 {
				t.Fatalf("cut: exit %d, stderr %q; want 1 and one line saying where the log ends early", code, errs)
			}
			mustContain(t, out, "READ STOPPED: cut.log: read the log: stopped after line ", "the compressed log ends early", "calls to allocation functions: ",
				"live at the cut: ")
			if j, _ := os.ReadFile(filepath.Join(dir, "jc")); !bytes.Contains(j, []byte(`"truncated_gzipped_logs": 1`)) || !bytes.Contains(j, []byte(`"live_at_cut": true`)) {
				t.Errorf("the JSON of a cut %v log does not count it: %s", k, j)
			}

			// Damaged: the second half's bytes flipped.
			bad := append([]byte{}, z...)
			for i := len(bad) * 2 / 3; i < len(bad)-4; i++ {
				bad[i] ^= 0xa5
			}
			badp := filepath.Join(dir, "bad.log")
			os.WriteFile(badp, bad, 0o644)
			out, errs, code = runMain(t, badp)
			if code != 1 || !strings.Contains(errs, "damaged") || !strings.Contains(errs, "at byte ") || strings.Count(errs, "\n") != 1 {
				t.Errorf("damaged: exit %d, stderr %q; want 1 and one line saying damaged, and where", code, errs)
			}
			// What came before the damage is reported.
			mustContain(t, out, "READ STOPPED: bad.log: ", "calls to allocation functions: ")
		})
	}
	t.Run("xz", func(t *testing.T) {
		p := writeFile(t, "run.log.xz", []byte("\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4\x46"))
		_, errs, code := runMain(t, p)
		if code != 1 || !strings.Contains(errs, "xz-compressed") || strings.Count(errs, "\n") != 1 {
			t.Errorf("xz: exit %d, stderr %q", code, errs)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		z := compressed(t, known, logio.Zstd)
		p := writeFile(t, "run.log.zst", z)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		old := os.Stdin
		os.Stdin = f
		defer func() { os.Stdin = old }()
		out, errs, code := runMain(t, "-")
		if code != 0 || errs != "" {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		want := strings.ReplaceAll(wantText, "run.log", "stdin")
		if out != want {
			t.Errorf("the report of a zstd log on stdin differs from the plain log's:\n%s\n--- plain (named stdin) ---\n%s", out, want)
		}
	})
}
