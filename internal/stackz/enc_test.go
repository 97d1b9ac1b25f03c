package stackz

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// event is one event line and the stack whose text follows it.
type event struct {
	line  []byte
	stack int
}

// logLike makes n events of a memtrack-like log with their stacks drawn
// from nstacks.
func logLike(r *rand.Rand, n, nstacks int) ([][]byte, []event) {
	stacks := make([][]byte, nstacks)
	for i := range stacks {
		var b []byte
		for f := range 1 + r.Intn(30) {
			b = fmt.Appendf(b, "[memtrack]   #%-2d /usr/lib/libx.so(fn_%d+0x%x) [0x%x]\n", f, r.Intn(50), r.Intn(400), 0x7f0000000000+r.Intn(1<<30))
		}
		stacks[i] = b
	}
	var evs []event
	total, ts := 0, 1000
	for range n {
		size := 16 << r.Intn(8)
		total += size
		ts += r.Intn(5)
		line := fmt.Appendf(nil, "[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  total=%-12d  ptr=0x%x\n", 4242, "prog", "malloc", ts, size, total, 0x5611940000+r.Intn(1<<20)*16)
		id := r.Intn(nstacks)
		if r.Intn(4) == 0 {
			id = r.Intn(2)
		}
		if r.Intn(10) == 0 {
			id = -1 // no stack
		}
		evs = append(evs, event{line, id})
	}
	return stacks, evs
}

// write feeds events through an encoder in WriteParts of random sizes,
// now and then a plain Write or a Flush, and returns the frame and the
// text it should decode to.
func write(t testing.TB, r *rand.Rand, stacks [][]byte, evs []event, window int) ([]byte, []byte) {
	t.Helper()
	var z, want bytes.Buffer
	e, err := NewEncoder(&z, window)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < len(evs); {
		n := min(1+r.Intn(3000), len(evs)-k)
		var text []byte
		var refs []Ref
		for _, ev := range evs[k : k+n] {
			text = append(text, ev.line...)
			want.Write(ev.line)
			if ev.stack >= 0 {
				refs = append(refs, Ref{Off: len(text), ID: uint64(ev.stack), Text: stacks[ev.stack]})
				want.Write(stacks[ev.stack])
			}
		}
		k += n
		if err := e.WriteParts(text, refs); err != nil {
			t.Fatal(err)
		}
		switch r.Intn(6) {
		case 0:
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			// A stack's text written as plain text, and a stack
			// given again as a new slice of the same bytes.
			s := stacks[r.Intn(len(stacks))]
			e.Write(s)
			want.Write(s)
			c := bytes.Clone(stacks[0])
			e.WriteParts(nil, []Ref{{ID: 0, Text: c}})
			want.Write(c)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes(), want.Bytes()
}

func decode(t testing.TB, z []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(bytes.NewReader(z), zstd.WithDecoderMaxWindow(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, c := range []struct{ n, stacks, window int }{{0, 1, 1 << 20}, {1, 1, 1 << 10}, {300, 3, 1 << 10}, {5000, 40, 1 << 16}, {20000, 200, 1 << 20}, {20000, 10, 8 << 20}} {
		stacks, evs := logLike(r, c.n, c.stacks)
		z, want := write(t, r, stacks, evs, c.window)
		if got := decode(t, z); !bytes.Equal(got, want) {
			t.Fatalf("%+v: decoded %d bytes differ from the %d written", c, len(got), len(want))
		}
		if c.n > 1000 {
			t.Logf("%+v: %d → %d bytes, %.2f an event", c, len(want), len(z), float64(len(z))/float64(c.n))
		}
	}
}

// TestZstdCLI: zstd(1), the reference decoder, reads the frame too.
func TestZstdCLI(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("no zstd(1)")
	}
	r := rand.New(rand.NewSource(2))
	stacks, evs := logLike(r, 20000, 50)
	z, want := write(t, r, stacks, evs, 1<<20)
	f := t.TempDir() + "/x.zst"
	os.WriteFile(f, z, 0o644)
	got, err := exec.Command("zstd", "-dc", f).Output()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("zstd -dc: %v, %d bytes of %d", err, len(got), len(want))
	}
}
