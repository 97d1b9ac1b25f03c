package analysis

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
)

// lineRec is one parsed line with its texts, not their offsets, so that
// records of batches cut in different places compare.
type lineRec struct {
	line                 string
	kind                 logfmt.Kind
	op                   logfmt.Op
	hasSize, bad, lazy   bool
	tid                  int64
	ts, size, total, ptr uint64
	a, b, c, whole       string
}

func lineRecs(b *batch) []lineRec {
	out := make([]lineRec, len(b.recs))
	start := int32(0)
	for i := range b.recs {
		r := &b.recs[i]
		end := b.ends[i]
		out[i] = lineRec{line: string(b.data[start:end]), kind: r.kind, op: r.op, hasSize: r.hasSize, bad: r.bad, lazy: r.lazy,
			tid: r.tid, ts: r.ts, size: r.size, total: r.total, ptr: r.ptr,
			a: string(b.text(r.a0, r.a1)), b: string(b.text(r.b0, r.b1)), c: string(b.text(r.c0, r.c1))}
		if r.lazy {
			out[i].whole = string(b.text(r.l0, r.l1))
		}
		start = end + 1
	}
	return out
}

// streamed reads r with Stream (o as given, plus the hook) and returns
// every parsed line in the order the model applied them.
func streamed(t *testing.T, r io.Reader, o StreamOptions) ([]lineRec, *Model, error) {
	t.Helper()
	var got []lineRec
	o.applying = func(b *batch) { got = append(got, lineRecs(b)...) }
	m := New()
	err := m.Stream(r, o)
	return got, m, err
}

// sequential is the reader before lines were read by the buffer and split
// by the parsers: logfmt.Scanner line by line, each line parsed and
// applied on its own, in order.
func sequential(t *testing.T, data []byte) ([]lineRec, *Model) {
	t.Helper()
	m := New()
	var out []lineRec
	sc := logfmt.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		b := &batch{lazy: true}
		b.add(sc.Line())
		b.parse()
		out = append(out, lineRecs(b)...)
		m.apply(b)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	m.apply(&batch{flush: true})
	m.Counts.Overlong = int64(sc.Overlong)
	m.Finish()
	return out, m
}

// sameModel compares what a reader's figures come from.
func sameModel(t *testing.T, name string, got, want *Model) {
	t.Helper()
	if !reflect.DeepEqual(got.Counts, want.Counts) {
		t.Errorf("%s: counts differ:\n got  %+v\n want %+v", name, got.Counts, want.Counts)
	}
	if !reflect.DeepEqual(got.Threads, want.Threads) {
		t.Errorf("%s: threads differ", name)
	}
	for _, c := range []struct {
		col       string
		got, want any
	}{{"TS", got.TS, want.TS}, {"Size", got.Size, want.Size}, {"Ptr", got.Ptr, want.Ptr},
		{"FreeTS", got.FreeTS, want.FreeTS}, {"FreeThread", got.FreeThread, want.FreeThread}, {"Stack", got.Stack, want.Stack}} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: column %s differs", name, c.col)
		}
	}
}

func sameLines(t *testing.T, name string, got, want []lineRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d lines parsed, the sequential reader parses %d", name, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: line %d differs:\n got  %+v\n want %+v", name, i+1, got[i], want[i])
			return
		}
	}
}

// choppy returns at most n bytes per Read, n drawn anew each time: the
// buffer's partial last line is carried across every kind of cut.
type choppy struct {
	r   io.Reader
	rnd *rand.Rand
	max int
}

func (c *choppy) Read(p []byte) (int, error) {
	n := 1 + c.rnd.IntN(c.max)
	return c.r.Read(p[:min(n, len(p))])
}

// streamInputs are logs of every shape the reader meets: generated (in
// time order and memtrack's per-thread buffered order, with and without
// frames), the fuzz corpus and the agent's golden logs, cut in the middle
// of a line, garbled, with CRLF and blank lines, a prelude of program
// output, and lines longer than logfmt.MaxLine.
func streamInputs(t *testing.T) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(35, 3))
	in := map[string][]byte{}
	in["generated"] = writeEvents(genHistory(r, 20_000, 8), false, r, false)
	in["generated, memtrack order"] = writeEvents(genHistory(r, 20_000, 8), true, r, true)
	var framed []byte
	for i, line := range bytes.SplitAfter(in["generated"], []byte("\n")) {
		framed = append(framed, line...)
		if i%3 == 0 && bytes.Contains(line, []byte("malloc")) {
			for d := range 4 {
				framed = fmt.Appendf(framed, "[memtrack]   #%d  /lib/libx.so(fn%d+0x%x) [0x7f%x]\n", d, (i+d)%50, d*16, i*d)
			}
		}
	}
	in["generated, frames"] = framed
	var corpus []byte
	for _, s := range fuzzSeeds {
		corpus = append(corpus, s...)
	}
	in["fuzz corpus"] = corpus
	golden, _ := filepath.Glob("../agent/testdata/*.log")
	if len(golden) == 0 {
		t.Fatal("no golden logs in agent/testdata")
	}
	for _, p := range golden {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in["golden "+filepath.Base(p)] = b
	}
	g := framed
	in["cut mid-line"] = g[:len(g)/2+17]
	garbled := bytes.Clone(g)
	for range 2000 {
		garbled[r.IntN(len(garbled))] = byte(r.IntN(256))
	}
	in["garbled bytes"] = garbled
	crlf := bytes.ReplaceAll(g[:len(g)/3], []byte("\n"), []byte("\r\n"))
	crlf = bytes.ReplaceAll(crlf, []byte("ts=5"), []byte("\n\nts=5"))
	in["CRLF and blank lines"] = crlf
	in["prelude"] = append([]byte(strings.Repeat("program output\n", 5000)+"no newline at the end of this "), g...)
	var long []byte
	long = append(long, g[:len(g)/4]...)
	long = append(long, bytes.Repeat([]byte("x"), logfmt.MaxLine+100)...)
	long = append(long, '\n')
	long = append(long, g[len(g)/4:len(g)/2]...)
	long = append(long, bytes.Repeat([]byte("y"), 300<<10)...) // past the first buffer, not MaxLine
	long = append(long, '\n')
	long = append(long, g[len(g)/2:]...)
	long = append(long, bytes.Repeat([]byte("z"), logfmt.MaxLine+5)...) // unterminated and overlong
	in["overlong lines"] = long
	return in
}

// TestStreamSameAsSequential: the reader that reads by the buffer, splits
// and parses lines on other goroutines and applies them in order gives the
// lines, records and model of the sequential line-by-line reader, whatever
// the input and however its reads are cut.
func TestStreamSameAsSequential(t *testing.T) {
	for name, data := range streamInputs(t) {
		want, wm := sequential(t, data)
		got, gm, err := streamed(t, bytes.NewReader(data), StreamOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameLines(t, name, got, want)
		sameModel(t, name, gm, wm)
		for _, w := range []int{1, 2, 4} {
			rnd := rand.New(rand.NewPCG(uint64(w), 9))
			got, gm, err := streamed(t, &choppy{bytes.NewReader(data), rnd, 70 << 10}, StreamOptions{Workers: w})
			if err != nil {
				t.Fatalf("%s, %d workers, choppy reads: %v", name, w, err)
			}
			sameLines(t, fmt.Sprintf("%s, %d workers, choppy reads", name, w), got, want)
			sameModel(t, fmt.Sprintf("%s, %d workers, choppy reads", name, w), gm, wm)
		}
	}
}

// TestStreamSameAsSequentialZstd: a .zst log, as memview and the report
// read one (through logio), gives the lines of its plain text.
func TestStreamSameAsSequentialZstd(t *testing.T) {
	in := streamInputs(t)
	for _, name := range []string{"generated, frames", "cut mid-line", "overlong lines"} {
		data := in[name]
		var z bytes.Buffer
		w, err := logio.NewWriter(&z, logio.Zstd, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		want, wm := sequential(t, data)
		got, gm, err := streamed(t, logio.NewReader(bytes.NewReader(z.Bytes())), StreamOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameLines(t, name+" (.zst)", got, want)
		sameModel(t, name+" (.zst)", gm, wm)
	}
}

// TestStreamSameAsSequentialGrowing: a log that arrives piece by piece
// (memview -f on a file, or stdin and TCP through a StreamReader) with
// the reader waiting at its end in between gives the lines of the whole
// log read at once.
func TestStreamSameAsSequentialGrowing(t *testing.T) {
	data := streamInputs(t)["generated, frames"]
	want, _ := sequential(t, data)

	pr, pw := io.Pipe()
	go func() {
		rnd := rand.New(rand.NewPCG(5, 5))
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(40<<10))
			pw.Write(rest[:n])
			rest = rest[n:]
			if rnd.IntN(8) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		pw.Close()
	}()
	got, _, err := streamed(t, NewStreamReader(pr, nil), StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "stream", got, want)

	// A growing file, followed: written in pieces while the reader polls.
	p := filepath.Join(t.TempDir(), "grow.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rf, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	go func() {
		rnd := rand.New(rand.NewPCG(6, 6))
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(64<<10))
			f.Write(rest[:n])
			rest = rest[n:]
			time.Sleep(time.Millisecond)
		}
		// The summary line, a followed file's last: the reader ends.
		f.Write(logfmt.AppendSummary(nil, logfmt.Summary{}))
	}()
	got, _, err = streamed(t, &Follower{R: rf, Poll: time.Millisecond}, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got); n == 0 || got[n-1].a != logfmt.WordSummary {
		t.Fatalf("the followed file's last line is not its summary")
	}
	sameLines(t, "followed file", got[:len(got)-1], want)
}

// TestSortMatchEvs: the two-CPU sort of the re-matching gives the order
// of one sort, on events that share processes, addresses, time stamps
// and read order, in any initial order.
func TestSortMatchEvs(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 35))
	for _, n := range []int{10, parallelSortMin, 3*parallelSortMin + 7} {
		for _, spread := range []uint64{1, 4, 1 << 40} {
			evs := make([]matchEv, n)
			for i := range evs {
				evs[i] = matchEv{ptr: r.Uint64N(spread) * 16, ts: r.Uint64N(spread), at: r.Uint64N(spread), proc: int32(r.IntN(3)), ref: int32(i)}
				if r.IntN(2) == 0 {
					evs[i].ref = ^int32(i)
				}
			}
			want := slices.Clone(evs)
			slices.SortFunc(want, cmpMatchEv)
			sortMatchEvs(evs)
			if !slices.Equal(evs, want) {
				t.Fatalf("%d events, spread %d: not the order of one sort", n, spread)
			}
		}
	}
}
