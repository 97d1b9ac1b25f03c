package stackz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// logLike makes n events of a memtrack-like log with stacks drawn from a
// few, and the marks that say where each stack's text is.
func logLike(r *rand.Rand, n, nstacks int) ([]byte, []Mark) {
	stacks := make([][]byte, nstacks)
	for i := range stacks {
		var b []byte
		for f := range 5 + r.Intn(30) {
			b = fmt.Appendf(b, "[memtrack]   #%-2d /usr/lib/libx.so(fn_%d+0x%x) [0x%x]\n", f, r.Intn(50), r.Intn(400), uint64(0x7f0000000000)+uint64(r.Intn(1<<30)))
		}
		stacks[i] = b
	}
	var out []byte
	var marks []Mark
	total, ts := 0, 1000
	for range n {
		size := 16 << r.Intn(8)
		total += size
		ts += r.Intn(5)
		out = fmt.Appendf(out, "[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  total=%-12d  ptr=0x%x\n", 4242, "prog", "malloc", ts, size, total, uint64(0x5611940000)+uint64(r.Intn(1<<20))*16)
		id := r.Intn(nstacks)
		if r.Intn(4) == 0 {
			id = r.Intn(2)
		}
		m := Mark{Off: len(out), Len: len(stacks[id]), ID: uint64(id)}
		if r.Intn(8) != 0 {
			m.Text = stacks[id] // mostly given as the agent gives them
		}
		marks = append(marks, m)
		out = append(out, stacks[id]...)
	}
	return out, marks
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

// write feeds text through an encoder in pieces of random sizes, with
// the marks of each piece, flushing now and then.
func write(t testing.TB, r *rand.Rand, text []byte, marks []Mark, window int) []byte {
	t.Helper()
	var z bytes.Buffer
	e, err := NewEncoder(&z, window)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(text); {
		n := min(1+r.Intn(300<<10), len(text)-off)
		ms := marksIn(marks, off, n)
		if err := e.WriteMarked(text[off:off+n], ms); err != nil {
			t.Fatal(err)
		}
		off += n
		if r.Intn(3) == 0 {
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, c := range []struct{ n, stacks, window int }{{0, 1, 1 << 20}, {1, 1, 1 << 10}, {300, 3, 1 << 10}, {5000, 40, 1 << 16}, {20000, 200, 1 << 20}, {20000, 10, 8 << 20}} {
		text, marks := logLike(r, c.n, c.stacks)
		z := write(t, r, text, marks, c.window)
		if got := decode(t, z); !bytes.Equal(got, text) {
			t.Fatalf("%+v: decoded %d bytes differ from the %d written", c, len(got), len(text))
		}
		if c.n > 1000 {
			t.Logf("%+v: %d → %d bytes, %.2f an event", c, len(text), len(z), float64(len(z))/float64(c.n))
		}
	}
}

// TestStacksForgotten: a run of ever new stacks keeps only the window's
// in the encoder's table.
func TestStacksForgotten(t *testing.T) {
	var z bytes.Buffer
	e, _ := NewEncoder(&z, 1<<16)
	for i := range 200000 {
		text := fmt.Appendf(nil, "[memtrack]   #0  /lib/x.so(f%d+0x1) [0x%x]\n", i, i)
		line := fmt.Appendf(nil, "[memtrack] tid=1 ts=%d\n", i)
		p := append(line, text...)
		if err := e.WriteMarked(p, []Mark{{Off: len(line), Len: len(text), ID: uint64(i), Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	// A window of 64 KiB holds about 1,000 of these events.
	if n := len(e.last); n > 2*minSweep+1 {
		t.Fatalf("%d stacks kept after 200,000 distinct ones", n)
	}
	e.Close()
	if got := decode(t, z.Bytes()); !bytes.Contains(got, []byte("f199999+0x1")) {
		t.Fatal("the last stack did not decode")
	}
}

// sparse turns a piece of text and its marks into WriteSparse's form:
// the marks' texts taken out of p, each mark at the place of its text. A
// mark given without its slice gets the bytes of the text it covers.
func sparse(p []byte, marks []Mark) ([]byte, []Mark) {
	var sp []byte
	var sm []Mark
	prev := 0
	for _, m := range marks {
		sp = append(sp, p[prev:m.Off]...)
		if m.Text == nil {
			m.Text = p[m.Off : m.Off+m.Len]
		}
		sm = append(sm, Mark{Off: len(sp), Len: m.Len, ID: m.ID, Text: m.Text})
		prev = m.Off + m.Len
	}
	return append(sp, p[prev:]...), sm
}

// TestSparseSameFrame: the stacks' texts given apart (WriteSparse) make
// the frame WriteMarked makes of the whole text, byte for byte, and
// Expand gives that text back. With the blocks coded and written on a
// goroutine of its own from some write on (Concurrent), the frame decodes
// to the same text, about as small.
func TestSparseSameFrame(t *testing.T) {
	for _, c := range []struct{ n, stacks, window int }{{1, 1, 1 << 10}, {300, 3, 1 << 10}, {5000, 40, 1 << 16}, {20000, 200, 1 << 20}} {
		text, marks := logLike(rand.New(rand.NewSource(int64(c.n))), c.n, c.stacks)
		var whole, apart, conc bytes.Buffer
		ew, _ := NewEncoder(&whole, c.window)
		ea, _ := NewEncoder(&apart, c.window)
		ec, _ := NewEncoder(&conc, c.window)
		r := rand.New(rand.NewSource(2))
		for off := 0; off < len(text); {
			n := min(1+r.Intn(300<<10), len(text)-off)
			ms := marksIn(marks, off, n)
			p := text[off : off+n]
			sp, sm := sparse(p, ms)
			if back, err := Expand(nil, sp, sm); err != nil || !bytes.Equal(back, p) {
				t.Fatalf("%+v: Expand gave %d bytes (%v) for %d", c, len(back), err, len(p))
			}
			if err := ew.WriteMarked(p, ms); err != nil {
				t.Fatal(err)
			}
			if err := ea.WriteSparse(sp, sm); err != nil {
				t.Fatal(err)
			}
			if err := ec.WriteSparse(sp, sm); err != nil {
				t.Fatal(err)
			}
			if r.Intn(4) == 0 {
				ec.Concurrent()
			}
			off += n
			if r.Intn(3) == 0 {
				ew.Flush()
				ea.Flush()
				if err := ec.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := ew.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ea.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ec.Close(); err != nil {
			t.Fatal(err)
		}
		if got := decode(t, conc.Bytes()); !bytes.Equal(got, text) {
			t.Fatalf("%+v: the concurrent frame decoded to %d bytes, not the %d written", c, len(got), len(text))
		}
		if conc.Len() > whole.Len()+whole.Len()/50+64 {
			t.Errorf("%+v: the concurrent frame is %d bytes, the whole text's %d", c, conc.Len(), whole.Len())
		}
		if !bytes.Equal(whole.Bytes(), apart.Bytes()) {
			t.Fatalf("%+v: the sparse frame (%d bytes) differs from the whole text's (%d)", c, apart.Len(), whole.Len())
		}
		if got := decode(t, apart.Bytes()); !bytes.Equal(got, text) {
			t.Fatalf("%+v: the sparse frame decoded to %d bytes, not the %d written", c, len(got), len(text))
		}
	}
}

// TestSparseMarksRefused: marks out of order or past the text are
// refused, not written somewhere else.
// TestSkipNumSameFrame: passing over the numbers' digits leaves the frame
// as find at every position makes it, on a synthetic log and on
// STACKZ_LOG's when set.
func TestSkipNumSameFrame(t *testing.T) {
	type input struct {
		name   string
		chunks []chunk
	}
	var inputs []input
	for _, n := range []int{300, 20000} {
		text, marks := logLike(rand.New(rand.NewSource(int64(n))), n, n/100+1)
		var cs []chunk
		for off := 0; off < len(text); off += 100 << 10 {
			k := min(100<<10, len(text)-off)
			cs = append(cs, chunk{text[off : off+k], marksIn(marks, off, k)})
		}
		inputs = append(inputs, input{fmt.Sprintf("logLike %d", n), cs})
	}
	if os.Getenv("STACKZ_LOG") != "" {
		_, cs, _ := realLog(t)
		inputs = append(inputs, input{"STACKZ_LOG", cs})
	}
	for _, in := range inputs {
		var frames [2]bytes.Buffer
		var skipped int64
		for k := range frames {
			e, _ := NewEncoder(&frames[k], 1<<20)
			e.noSkip = k == 1
			for _, c := range in.chunks {
				if err := e.WriteMarked(c.p, c.ms); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				skipped = e.Stats.Skipped
			}
		}
		if !bytes.Equal(frames[0].Bytes(), frames[1].Bytes()) {
			t.Errorf("%s: the frame with the digits passed over (%d bytes) differs from find's at every position (%d)", in.name, frames[0].Len(), frames[1].Len())
		}
		if skipped == 0 {
			t.Errorf("%s: no position passed over: the test compares nothing", in.name)
		}
	}
}

func TestSparseMarksRefused(t *testing.T) {
	var z bytes.Buffer
	e, _ := NewEncoder(&z, 1<<10)
	txt := []byte("stack\n")
	for _, ms := range [][]Mark{{{Off: 3, Text: txt}, {Off: 2, Text: txt}}, {{Off: 5, Text: txt}}, {{Off: -1, Text: txt}}} {
		if err := e.WriteSparse([]byte("abcd"), ms); !errors.Is(err, ErrSparseMarks) {
			t.Fatalf("marks %+v: %v, want ErrSparseMarks", ms, err)
		}
		if _, err := Expand(nil, []byte("abcd"), ms); !errors.Is(err, ErrSparseMarks) {
			t.Fatalf("Expand, marks %+v: %v, want ErrSparseMarks", ms, err)
		}
	}
	if err := e.WriteSparse([]byte("abcd"), []Mark{{Off: 0, Text: txt}, {Off: 4, Text: txt}, {Off: 4, Text: txt}}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if got := string(decode(t, z.Bytes())); got != "stack\nabcdstack\nstack\n" {
		t.Fatalf("decoded %q", got)
	}
}

// TestConcurrentRawBlocks: a block written raw leaves the decoder's
// repeat offsets as they were, which the parse, ahead on its own
// goroutine, cannot know: the back end makes the repeat codes itself.
func TestConcurrentRawBlocks(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	text, marks := logLike(r, 6000, 20)
	var z bytes.Buffer
	e, _ := NewEncoder(&z, 1<<16)
	e.Concurrent()
	var want []byte
	noise := make([]byte, 200<<10)
	for i, off := 0, 0; off < len(text); i++ {
		n := min(64<<10, len(text)-off)
		ms := marksIn(marks, off, n)
		if err := e.WriteMarked(text[off:off+n], ms); err != nil {
			t.Fatal(err)
		}
		want = append(want, text[off:off+n]...)
		off += n
		if i%2 == 0 {
			// Incompressible: at least one raw block.
			r.Read(noise)
			e.Write(noise)
			want = append(want, noise...)
		}
		// A block of 8 bytes, those at the last repeat offset back:
		// the parse takes them as a match with no literals before it,
		// which moves the repeat offsets; the block is smaller raw,
		// which leaves the decoder's as they were; the next block's
		// matches are coded against the decoder's, not the parse's.
		e.Flush()
		k := len(want) - int(e.reps[0])
		e.Write(want[k : k+8])
		want = append(want, want[k:k+8]...)
		e.Flush()
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := decode(t, z.Bytes()); !bytes.Equal(got, want) {
		t.Fatalf("decoded %d bytes, wrote %d", len(got), len(want))
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestConcurrentWriteError: a write that fails on the back end's
// goroutine is the encoder's error at the next Flush or Close, and
// neither waits forever.
func TestConcurrentWriteError(t *testing.T) {
	text, marks := logLike(rand.New(rand.NewSource(4)), 20000, 50)
	e, _ := NewEncoder(&failWriter{n: 20 << 10}, 1<<16)
	e.Concurrent()
	var err error
	for off := 0; off < len(text) && err == nil; off += 64 << 10 {
		n := min(64<<10, len(text)-off)
		ms := marksIn(marks, off, n)
		if err = e.WriteMarked(text[off:off+n], ms); err == nil {
			err = e.Flush()
		}
	}
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("writing %d bytes through 20 KiB of room: %v, want the write's error", len(text), err)
	}
	if cerr := e.Close(); cerr == nil || !strings.Contains(cerr.Error(), "disk full") {
		t.Fatalf("Close after the error: %v", cerr)
	}
}

// marksIn returns the marks that lie whole in text[off:off+n], their
// offsets made relative to off.
func marksIn(marks []Mark, off, n int) []Mark {
	var ms []Mark
	for _, m := range marks {
		if m.Off >= off && m.Off+m.Len <= off+n {
			ms = append(ms, Mark{Off: m.Off - off, Len: m.Len, ID: m.ID, Text: m.Text})
		}
	}
	return ms
}
