package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

type block struct {
	ptr, size uint64
	stack     int32
	tid       int
}

type thread struct {
	tid   int64
	name  string
	total uint64
	live  []block
	buf   []byte // memtrack mode: per-thread buffer
}

func main() {
	var (
		events    = flag.Int("events", 1_000_000, "number of alloc and free lines to write")
		threads   = flag.Int("threads", 8, "number of threads")
		stackFrac = flag.Float64("stack-frac", 0.25, "fraction of events that carry stack frames")
		depth     = flag.Int("depth", 4, "frames per stack")
		leakFrac  = flag.Float64("leak-frac", 0.01, "fraction of allocations never freed")
		out       = flag.String("o", "-", "output file (- for stdout)")
		seed      = flag.Uint64("seed", 1, "random seed")
		memtrack  = flag.Bool("memtrack", false, "write like memtrack: per-thread buffered (not in time order), frees without size=, no [memtrace] lines")
		procs     = flag.Int("procs", 1, "number of processes (memtrace thread meta lines attribute threads)")
		lost      = flag.Int("lost", 0, "write a [memtrace] lost line reporting this many lost events")
		rate      = flag.Int("rate", 0, "with -follow: events per second (0 = as fast as possible)")
		follow    = flag.Bool("follow", false, "flush after every 1000 events (for follow-mode tests)")
		nstacks   = flag.Int("stacks", 400, "number of distinct call stacks the events' frames come from")
		nframes   = flag.Int("frames", 0, "draw the stacks' frames from this many distinct frames, each in a function of its own (0: each frame of each stack made at random, in one of a dozen functions)")
		inTurn    = flag.Bool("stacks-in-turn", false, "events take the stacks in turn rather than at random, so that -stacks N stack-carrying events hold all N")
	)
	flag.Parse()
	pool := stackPool{n: *nstacks, frames: *nframes, inTurn: *inTurn}
	if err := run(*events, *threads, *stackFrac, *depth, *leakFrac, *out, *seed, *memtrack, *procs, *lost, *rate, *follow, pool); err != nil {
		fmt.Fprintln(os.Stderr, "memtrace-genlog:", err)
		os.Exit(1)
	}
}

var syms = []string{
	"_ZN3app6Worker7processERKNS_7RequestE", "_ZN3app5Cache6insertEmRKSs", "_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_",
	"_ZN3app6Parser5parseEPKcm", "_ZN3app4Pool4growEm", "main", "_ZN3app3Net4recvEv", "_ZN3app8Registry3addESt10shared_ptrINS_4NodeEE",
	"_ZN3app6Worker3runEv", "start_thread", "_ZN3app3Log5writeERKSs", "_ZN3app5Timer4tickEv",
}

// stackPool says how the log's call stacks are made: a real program has a
// few hundred allocating call sites, a large one (a JIT, a program of many
// libraries) a million distinct stacks over far fewer distinct frames.
type stackPool struct {
	n      int  // distinct stacks
	frames int  // distinct frames they are made of; 0: each made at random
	inTurn bool // stack-carrying events take stack 0, 1, …, n-1, 0, …
}

func run(events, nthreads int, stackFrac float64, depth int, leakFrac float64, out string, seed uint64, memtrack bool, procs, lost, rate int, follow bool, pool stackPool) error {
	if nthreads < 1 || events < 0 || procs < 1 {
		return fmt.Errorf("bad arguments: -threads and -procs must be at least 1")
	}
	if pool.n < 1 || pool.frames < 0 || depth < 0 {
		return fmt.Errorf("bad arguments: -stacks must be at least 1, -frames and -depth at least 0")
	}
	var w io.Writer = os.Stdout
	if out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return fmt.Errorf("create output: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	defer bw.Flush()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	type frame struct {
		mod, sym  string
		off, addr uint64
	}
	randomFrame := func() frame {
		s := syms[r.IntN(len(syms))]
		return frame{"./app", s, uint64(r.IntN(0x400)), 0x555555554000 + uint64(r.IntN(1<<20))}
	}
	var frames []frame
	for i := range pool.frames {
		// A function of its own per frame: a large program's many.
		f := randomFrame()
		name := "fn" + strconv.Itoa(i)
		f.sym = "_ZN3app" + strconv.Itoa(len(name)) + name + "Ev"
		f.addr = 0x555555554000 + uint64(i)*64 + f.off&63
		frames = append(frames, f)
	}
	// Frames by index into one slice: a million stacks of separate
	// slices would be most of the generator's memory.
	flat := make([]int32, 0, pool.n*depth)
	for range pool.n {
		for range depth {
			if pool.frames > 0 {
				flat = append(flat, int32(r.IntN(len(frames))))
			} else {
				flat = append(flat, int32(len(frames)))
				frames = append(frames, randomFrame())
			}
		}
	}
	stackFrames := func(st int32) []int32 { return flat[int(st)*depth : (int(st)+1)*depth] }
	nextStack := int32(0)
	pickStack := func() int32 {
		if !pool.inTurn {
			return int32(r.IntN(pool.n))
		}
		st := nextStack
		nextStack = (nextStack + 1) % int32(pool.n)
		return st
	}

	var b []byte
	if !memtrack {
		b = logfmt.AppendHeader(b, logfmt.Header{Version: "genlog", PID: 4242, Comm: "app", Cmd: "./app --bench", Mode: "synthetic"})
	}
	ths := make([]*thread, nthreads)
	for i := range ths {
		name := "worker-" + strconv.Itoa(i)
		if i == 0 {
			name = "app"
		}
		ths[i] = &thread{tid: int64(4242 + i), name: name}
		if !memtrack {
			pid := 4242 + (i % procs)
			b = logfmt.AppendThread(b, logfmt.Thread{TID: ths[i].tid, PID: int64(pid), Name: name})
		}
	}
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	b = b[:0]
	// Free lists per size class make addresses recur, as with glibc.
	freeList := map[uint64][]uint64{}
	next := uint64(0x55aa00000000)
	sizes := []uint64{16, 24, 32, 48, 64, 100, 128, 256, 512, 1024, 4096, 65536, 1 << 20}
	ts := uint64(1000)
	var now time.Time
	if rate > 0 {
		now = time.Now()
	}
	ops := []string{"malloc", "malloc", "malloc", "new", "calloc", "realloc", "strdup", "new[]"}
	frees := map[string]string{"new": "delete", "new[]": "delete[]"}
	opOf := map[uint64]string{}
	written := 0
	emit := func(t *thread, line []byte, st int32) {
		dst := &b
		if memtrack {
			dst = &t.buf
		}
		*dst = append(*dst, line...)
		if st >= 0 {
			for k, fi := range stackFrames(st) {
				f := &frames[fi]
				*dst = logfmt.AppendFrame(*dst, k, f.mod, f.sym, f.off, f.addr)
			}
		}
		if memtrack && len(t.buf) >= 4096 {
			b = append(b, t.buf...)
			t.buf = t.buf[:0]
		}
	}
	var line []byte
	for written < events {
		t := ths[r.IntN(nthreads)]
		ts += uint64(1 + r.IntN(3))
		st := int32(-1)
		if r.Float64() < stackFrac {
			st = pickStack()
		}
		// Allocate while the thread holds few blocks or by chance; keep
		// enough events left to free everything that should be freed.
		remaining := events - written
		var pending int
		for _, th := range ths {
			pending += len(th.live)
		}
		doAlloc := len(t.live) == 0 || (r.IntN(2) == 0 && remaining > pending+1)
		if remaining <= pending {
			doAlloc = false
			if len(t.live) == 0 {
				continue
			}
		}
		if doAlloc {
			sz := sizes[r.IntN(len(sizes))]
			var p uint64
			if fl := freeList[sz]; len(fl) > 0 {
				p = fl[len(fl)-1]
				freeList[sz] = fl[:len(fl)-1]
			} else {
				p = next
				next += sz + 16
			}
			op := ops[r.IntN(len(ops))]
			t.total += sz
			line = logfmt.AppendAlloc(line[:0], t.tid, t.name, op, ts, sz, t.total, p)
			emit(t, line, st)
			written++
			if r.Float64() < leakFrac {
				continue // leaked: never tracked for a free
			}
			opOf[p] = op
			// A few blocks are freed by another thread (cross-thread free).
			owner := t
			if r.IntN(20) == 0 {
				owner = ths[r.IntN(nthreads)]
			}
			owner.live = append(owner.live, block{p, sz, st, 0})
		} else {
			// Free a recent block mostly (short-lived temporaries), sometimes an old one.
			k := len(t.live) - 1
			if r.IntN(4) == 0 {
				k = r.IntN(len(t.live))
			}
			bl := t.live[k]
			t.live[k] = t.live[len(t.live)-1]
			t.live = t.live[:len(t.live)-1]
			fop := "free"
			if f, ok := frees[opOf[bl.ptr]]; ok {
				fop = f
			}
			delete(opOf, bl.ptr)
			if memtrack {
				// memtrack's own free lines carry no size=.
				line = appendFreeNoSize(line[:0], t, fop, ts, bl.ptr)
			} else {
				line = logfmt.AppendFree(line[:0], t.tid, t.name, fop, ts, bl.size, bl.ptr)
			}
			emit(t, line, st)
			written++
			freeList[bl.size] = append(freeList[bl.size], bl.ptr)
		}
		if len(b) >= 1<<20 || (follow && written%1000 == 0) {
			if _, err := bw.Write(b); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			b = b[:0]
			if follow {
				if err := bw.Flush(); err != nil {
					return fmt.Errorf("write: %w", err)
				}
				if rate > 0 {
					want := now.Add(time.Duration(written) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(want))
				}
			}
		}
	}
	if lost > 0 && !memtrack {
		b = logfmt.AppendLost(b, logfmt.Lost{Count: uint64(lost), Total: uint64(lost), TS: ts})
	}
	for _, t := range ths {
		ts++
		line = logfmt.AppendExit(line[:0], t.tid, t.name, ts, t.total)
		if memtrack {
			t.buf = append(t.buf, line...)
			b = append(b, t.buf...)
			t.buf = nil
		} else {
			b = append(b, line...)
		}
	}
	if !memtrack {
		// A finished run, as memtrace ends its log: each process's
		// exit, then the summary. Without them the readers take the
		// log for one cut short, its blocks live at the cut.
		for p := 0; p < procs; p++ {
			ts++
			b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: int64(4242 + p), TS: ts, HasStatus: true})
		}
		b = logfmt.AppendSummary(b, logfmt.Summary{Events: uint64(written), Lost: uint64(lost)})
	}
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// appendFreeNoSize writes memtrack's recent free line, which has no size=
// field. logfmt writes memtrace's lines only, so the generator builds this
// variant from a memtrace free line by cutting the size field out.
func appendFreeNoSize(b []byte, t *thread, op string, ts, ptr uint64) []byte {
	full := logfmt.AppendFree(nil, t.tid, t.name, op, ts, 0, ptr)
	// "... ts=N  size=0             ptr=0x..." → drop "size=0" and its padding.
	for i := 0; i+5 <= len(full); i++ {
		if string(full[i:i+5]) == "size=" {
			j := i + 5
			for j < len(full) && full[j] != 'p' {
				j++
			}
			return append(append(b, full[:i]...), full[j:]...)
		}
	}
	return append(b, full...)
}
