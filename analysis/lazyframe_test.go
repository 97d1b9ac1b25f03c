package analysis

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// lazyLog has frame lines of every form logfmt knows, repeated at other
// indexes, and frame-like lines logfmt refuses.
const lazyLog = `[memtrack]   #0  /lib/stray.so(f+0x1) [0x10]
[memtrack] tid=1  (main           ) malloc     ts=1            size=16            total=16            ptr=0x1000
[memtrack]   #0  /lib/a.so(alpha+0x10) [0x7f00]
[memtrack]   #1  /lib/a.so(+0x20) [0x7f20]
[memtrack]   #2  /bin/prog() [0x400]
[memtrack]   #3  [0x999]
[memtrack]   #4  (sym+0x4) [0x55]
[memtrack]   #5  /lib/a.so(alpha+0x10) [0x7f00]` + "\r" + `
[memtrack] tid=1  (main           ) malloc     ts=2            size=32            total=48            ptr=0x2000
[memtrack]   #0  /lib/a.so(+0x20) [0x7f20]
[memtrack]   #1  /lib/a.so(alpha+0x10) [0x7f00]
[memtrack]   #x  /lib/a.so(alpha+0x10) [0x7f00]
[memtrack]   #2  /lib/a.so(alpha+0x10)
[memtrack]   #99999999999999999999  /lib/a.so(alpha+0x10) [0x7f00]
[memtrack]   #3    /bin/prog() [0x400]   
[memtrack]   #4  [0xzz]
[memtrack] tid=1  (main           ) free       ts=3            size=16            total=32            ptr=0x1000
[memtrack] tid=1  (main           ) malloc     ts=4            size=8             total=40            ptr=0x3000
[memtrack]   #0  [0x999]
[memtrack]   #1  (sym+0x4) [0x55]
[memtrack]   #2  /lib/a.so(+0x20) [0x7f20]
`

func loadBatches(t *testing.T, log string, lazy bool) *Model {
	t.Helper()
	m := New()
	// The model's seed, as Stream gives it: the parsers hash the frame
	// texts for the model's table.
	b := &batch{data: make([]byte, 0, len(log)+16), lazy: lazy, flush: true, seed: m.frames.seed}
	for _, line := range strings.SplitAfter(log, "\n") {
		if line == "" {
			continue
		}
		b.add([]byte(strings.TrimSuffix(line, "\n")))
	}
	b.parse()
	m.apply(b)
	m.Finish()
	return m
}

// A frame line left unparsed until its text is new must give the model
// that parsing every line gives: the same frames, stacks, counts (a
// malformed line is malformed either way).
func TestLazyFramesGiveTheSameModel(t *testing.T) {
	eager := loadBatches(t, lazyLog, false)
	lazy := loadBatches(t, lazyLog, true)
	if eager.Counts.Malformed == 0 || eager.Counts.StrayFrames == 0 {
		t.Fatalf("the log must exercise malformed and stray frames: %+v", eager.Counts)
	}
	if !reflect.DeepEqual(eager.Counts, lazy.Counts) {
		t.Errorf("counts differ:\neager %+v\nlazy  %+v", eager.Counts, lazy.Counts)
	}
	if !reflect.DeepEqual(allFrames(eager), allFrames(lazy)) {
		t.Errorf("frames differ:\neager %+v\nlazy  %+v", allFrames(eager), allFrames(lazy))
	}
	if !reflect.DeepEqual(allStacks(eager), allStacks(lazy)) {
		t.Errorf("stacks differ:\neager %v\nlazy  %v", allStacks(eager), allStacks(lazy))
	}
	if lazy.lazyHits == 0 {
		t.Error("the lazy path was not taken")
	}
	// The second allocation's stack: the two good frames, the padded one,
	// and nothing of the refused lines.
	if got := eager.NumStacks(); got < 2 {
		t.Fatal("no stacks were read")
	}
}

// FuzzLazyFrames: for any input, the lazy frame path builds the model the
// eager one builds.
func FuzzLazyFrames(f *testing.F) {
	f.Add([]byte(lazyLog))
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		eager := loadBatches(t, string(b), false)
		lazy := loadBatches(t, string(b), true)
		if !reflect.DeepEqual(eager.Counts, lazy.Counts) {
			t.Fatalf("counts differ:\neager %+v\nlazy  %+v", eager.Counts, lazy.Counts)
		}
		if !reflect.DeepEqual(allFrames(eager), allFrames(lazy)) || !reflect.DeepEqual(allStacks(eager), allStacks(lazy)) ||
			!reflect.DeepEqual(eager.Stack, lazy.Stack) {
			t.Fatalf("frames or stacks differ")
		}
	})
}

// allFrames is every interned frame of m, in id order.
func allFrames(m *Model) []Frame {
	out := make([]Frame, m.NumFrames())
	for i := range out {
		out[i] = m.Frame(uint32(i))
	}
	return out
}

// allStacks is every stack of m as its frame ids, by stack id.
func allStacks(m *Model) [][]uint32 {
	var out [][]uint32
	for s := range m.NumStacks() {
		out = append(out, m.Frames(uint32(s)))
	}
	return out
}

// A frame text seen before is found by the hash the parsers made, with
// the model's seed, without parsing the line again: through Stream and
// through a batch given the seed alike.
func TestLazyFramesHashedByTheParsers(t *testing.T) {
	var log strings.Builder
	log.WriteString("[memtrace] header version=1 pid=1 comm=p\n")
	const allocs = 5
	for i := range allocs {
		fmt.Fprintf(&log, "[memtrack] tid=1  (main           ) malloc     ts=%d            size=16            total=16            ptr=0x%x\n", i+1, 0x1000+16*i)
		log.WriteString("[memtrack]   #0  /lib/a.so(f+0x1) [0x7f01]\n")
		log.WriteString("[memtrack]   #1  /lib/a.so(g+0x2) [0x7f02]\n")
	}
	want := int64(2 * (allocs - 1)) // every frame line after the first two
	if m := loadBatches(t, log.String(), true); m.lazyHits != want {
		t.Errorf("batch: %d frame lines found by their hash, want %d", m.lazyHits, want)
	}
	m := New()
	if err := m.ReadAll(strings.NewReader(log.String())); err != nil {
		t.Fatal(err)
	}
	if m.lazyHits != want {
		t.Errorf("Stream: %d frame lines found by their hash, want %d", m.lazyHits, want)
	}
}
