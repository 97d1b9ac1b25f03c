package logio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFollowWholeMember: a gzip log whose last block came with its
// member's end (written and closed in one go, as a run that ends at once
// writes it) is followed to its last byte, summary included, and then
// waited on, not called cut; a second member appended later is read too.
func TestFollowWholeMember(t *testing.T) {
	for _, size := range []int{3, 40, 3000} {
		data := sampleLog(size, uint64(size))
		var z bytes.Buffer
		w, err := NewWriter(&z, Gzip, time.Hour) // no block end before Close
		if err != nil {
			t.Fatal(err)
		}
		// The first Write ends its block at once; the rest waits for
		// the timer, which Close comes before.
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
		path := filepath.Join(t.TempDir(), "log.gz")
		if err := os.WriteFile(path, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		l := Follow(f, 5*time.Millisecond)
		var got bytes.Buffer
		if err := readAvailable(t, l, &got, len(data), 5*time.Second); err != nil {
			t.Fatalf("%d events: %v", size, err)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%d events: followed %d bytes of %d (the summary line last)", size, got.Len(), len(data))
		}
		if err := readAvailable(t, l, &got, len(data)+1, 50*time.Millisecond); err != nil || got.Len() != len(data) {
			t.Fatalf("%d events: after the member: %d bytes, %v; want to wait for more", size, got.Len(), err)
		}
		more := sampleLog(5, 99)
		var z2 bytes.Buffer
		w, _ = NewWriter(&z2, Gzip, 0)
		w.Write(more)
		w.Close()
		appendFile(t, path, z2.Bytes())
		if err := readAvailable(t, l, &got, len(data)+len(more), 5*time.Second); err != nil || !bytes.Equal(got.Bytes()[len(data):], more) {
			t.Fatalf("%d events: a member appended: %d bytes of %d, %v", size, got.Len()-len(data), len(more), err)
		}
		l.Close()
		f.Close()
	}
}
