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
	o := options{
		events: *events, threads: *threads, stackFrac: *stackFrac, leakFrac: *leakFrac, depth: *depth,
		out: *out, seed: *seed, memtrack: *memtrack, follow: *follow, procs: *procs, lost: *lost, rate: *rate,
		pool: stackPool{n: *nstacks, frames: *nframes, inTurn: *inTurn},
	}
	if err := run(o); err != nil {
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

// options are the command line's.
type options struct {
	events, threads     int
	stackFrac, leakFrac float64
	depth               int
	out                 string
	seed                uint64
	memtrack, follow    bool
	procs, lost, rate   int
	pool                stackPool
}

type frame struct {
	mod, sym  string
	off, addr uint64
}

// generator holds one run's state: the random source is drawn from in a
// fixed order, so a seed gives the same log byte for byte.
type generator struct {
	o        options
	r        *rand.Rand
	bw       *bufio.Writer
	b        []byte // what is written next, in order
	line     []byte
	frames   []frame
	flat     []int32 // the stacks' frames, depth entries a stack
	next     int32   // the next stack when taken in turn
	ths      []*thread
	freeList map[uint64][]uint64 // per size class, so that addresses recur as with glibc
	top      uint64              // the next fresh address
	opOf     map[uint64]string
	ts       uint64
	written  int
	start    time.Time
}

var (
	sizes = []uint64{16, 24, 32, 48, 64, 100, 128, 256, 512, 1024, 4096, 65536, 1 << 20}
	ops   = []string{"malloc", "malloc", "malloc", "new", "calloc", "realloc", "strdup", "new[]"}
	frees = map[string]string{"new": "delete", "new[]": "delete[]"}
)

func run(o options) error {
	if o.threads < 1 || o.events < 0 || o.procs < 1 {
		return fmt.Errorf("bad arguments: -threads and -procs must be at least 1")
	}
	if o.pool.n < 1 || o.pool.frames < 0 || o.depth < 0 {
		return fmt.Errorf("bad arguments: -stacks must be at least 1, -frames and -depth at least 0")
	}
	var w io.Writer = os.Stdout
	if o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			return fmt.Errorf("create output: %w", err)
		}
		defer f.Close()
		w = f
	}
	g := &generator{
		o:        o,
		r:        rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15)),
		bw:       bufio.NewWriterSize(w, 1<<20),
		freeList: map[uint64][]uint64{},
		top:      0x55aa00000000,
		opOf:     map[uint64]string{},
		ts:       1000,
	}
	if o.rate > 0 {
		g.start = time.Now()
	}
	g.makeStacks()
	g.startLog()
	if err := g.writeOut(); err != nil {
		return err
	}
	for g.written < o.events {
		if err := g.event(); err != nil {
			return err
		}
	}
	g.endLog()
	if err := g.writeOut(); err != nil {
		return err
	}
	if err := g.bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func (g *generator) randomFrame() frame {
	s := syms[g.r.IntN(len(syms))]
	return frame{"./app", s, uint64(g.r.IntN(0x400)), 0x555555554000 + uint64(g.r.IntN(1<<20))}
}

func (g *generator) makeStacks() {
	pool := g.o.pool
	for i := range pool.frames {
		// A function of its own per frame: a large program's many.
		f := g.randomFrame()
		name := "fn" + strconv.Itoa(i)
		f.sym = "_ZN3app" + strconv.Itoa(len(name)) + name + "Ev"
		f.addr = 0x555555554000 + uint64(i)*64 + f.off&63
		g.frames = append(g.frames, f)
	}
	// Frames by index into one slice: a million stacks of separate
	// slices would be most of the generator's memory.
	g.flat = make([]int32, 0, pool.n*g.o.depth)
	for range pool.n {
		for range g.o.depth {
			if pool.frames > 0 {
				g.flat = append(g.flat, int32(g.r.IntN(len(g.frames))))
			} else {
				g.flat = append(g.flat, int32(len(g.frames)))
				g.frames = append(g.frames, g.randomFrame())
			}
		}
	}
}

func (g *generator) stackFrames(st int32) []int32 {
	return g.flat[int(st)*g.o.depth : (int(st)+1)*g.o.depth]
}

func (g *generator) pickStack() int32 {
	if !g.o.pool.inTurn {
		return int32(g.r.IntN(g.o.pool.n))
	}
	st := g.next
	g.next = (g.next + 1) % int32(g.o.pool.n)
	return st
}

func (g *generator) startLog() {
	if !g.o.memtrack {
		g.b = logfmt.AppendHeader(g.b, logfmt.Header{Version: "genlog", PID: 4242, Comm: "app", Cmd: "./app --bench", Mode: "synthetic"})
	}
	g.ths = make([]*thread, g.o.threads)
	for i := range g.ths {
		name := "worker-" + strconv.Itoa(i)
		if i == 0 {
			name = "app"
		}
		g.ths[i] = &thread{tid: int64(4242 + i), name: name}
		if !g.o.memtrack {
			pid := 4242 + (i % g.o.procs)
			g.b = logfmt.AppendThread(g.b, logfmt.Thread{TID: g.ths[i].tid, PID: int64(pid), Name: name})
		}
	}
}

func (g *generator) writeOut() error {
	if _, err := g.bw.Write(g.b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	g.b = g.b[:0]
	return nil
}

// emit adds an event line and its stack; memtrack writes per-thread
// buffers, so its lines come out of time order.
func (g *generator) emit(t *thread, st int32) {
	dst := &g.b
	if g.o.memtrack {
		dst = &t.buf
	}
	*dst = append(*dst, g.line...)
	if st >= 0 {
		for k, fi := range g.stackFrames(st) {
			f := &g.frames[fi]
			*dst = logfmt.AppendFrame(*dst, k, f.mod, f.sym, f.off, f.addr)
		}
	}
	if g.o.memtrack && len(t.buf) >= 4096 {
		g.b = append(g.b, t.buf...)
		t.buf = t.buf[:0]
	}
}

// event writes one allocation or free (or nothing, when the thread drawn
// has nothing left to free while the rest must be freed).
func (g *generator) event() error {
	t := g.ths[g.r.IntN(g.o.threads)]
	g.ts += uint64(1 + g.r.IntN(3))
	st := int32(-1)
	if g.r.Float64() < g.o.stackFrac {
		st = g.pickStack()
	}
	// Allocate while the thread holds few blocks or by chance; keep
	// enough events left to free everything that should be freed.
	remaining := g.o.events - g.written
	var pending int
	for _, th := range g.ths {
		pending += len(th.live)
	}
	doAlloc := len(t.live) == 0 || (g.r.IntN(2) == 0 && remaining > pending+1)
	if remaining <= pending {
		doAlloc = false
		if len(t.live) == 0 {
			return nil
		}
	}
	if doAlloc {
		g.alloc(t, st)
	} else {
		g.free(t, st)
	}
	return g.flushSome()
}

func (g *generator) alloc(t *thread, st int32) {
	sz := sizes[g.r.IntN(len(sizes))]
	var p uint64
	if fl := g.freeList[sz]; len(fl) > 0 {
		p = fl[len(fl)-1]
		g.freeList[sz] = fl[:len(fl)-1]
	} else {
		p = g.top
		g.top += sz + 16
	}
	op := ops[g.r.IntN(len(ops))]
	t.total += sz
	g.line = logfmt.AppendAlloc(g.line[:0], t.tid, t.name, op, g.ts, sz, t.total, p)
	g.emit(t, st)
	g.written++
	if g.r.Float64() < g.o.leakFrac {
		return // leaked: never tracked for a free
	}
	g.opOf[p] = op
	// A few blocks are freed by another thread (cross-thread free).
	owner := t
	if g.r.IntN(20) == 0 {
		owner = g.ths[g.r.IntN(g.o.threads)]
	}
	owner.live = append(owner.live, block{p, sz, st, 0})
}

func (g *generator) free(t *thread, st int32) {
	// Free a recent block mostly (short-lived temporaries), sometimes an old one.
	k := len(t.live) - 1
	if g.r.IntN(4) == 0 {
		k = g.r.IntN(len(t.live))
	}
	bl := t.live[k]
	t.live[k] = t.live[len(t.live)-1]
	t.live = t.live[:len(t.live)-1]
	fop := "free"
	if f, ok := frees[g.opOf[bl.ptr]]; ok {
		fop = f
	}
	delete(g.opOf, bl.ptr)
	if g.o.memtrack {
		// memtrack's own free lines carry no size=.
		g.line = appendFreeNoSize(g.line[:0], t, fop, g.ts, bl.ptr)
	} else {
		g.line = logfmt.AppendFree(g.line[:0], t.tid, t.name, fop, g.ts, bl.size, bl.ptr)
	}
	g.emit(t, st)
	g.written++
	g.freeList[bl.size] = append(g.freeList[bl.size], bl.ptr)
}

// flushSome writes the buffer out when it is large, and in follow mode
// every thousand events, at the requested rate.
func (g *generator) flushSome() error {
	follow := g.o.follow
	if len(g.b) < 1<<20 && !(follow && g.written%1000 == 0) {
		return nil
	}
	if err := g.writeOut(); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	if err := g.bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if g.o.rate > 0 {
		want := g.start.Add(time.Duration(g.written) * time.Second / time.Duration(g.o.rate))
		time.Sleep(time.Until(want))
	}
	return nil
}

func (g *generator) endLog() {
	memtrack := g.o.memtrack
	if g.o.lost > 0 && !memtrack {
		g.b = logfmt.AppendLost(g.b, logfmt.Lost{Count: uint64(g.o.lost), Total: uint64(g.o.lost), TS: g.ts})
	}
	for _, t := range g.ths {
		g.ts++
		g.line = logfmt.AppendExit(g.line[:0], t.tid, t.name, g.ts, t.total)
		if memtrack {
			t.buf = append(t.buf, g.line...)
			g.b = append(g.b, t.buf...)
			t.buf = nil
		} else {
			g.b = append(g.b, g.line...)
		}
	}
	if memtrack {
		return
	}
	// A finished run, as memtrace ends its log: each process's exit,
	// then the summary. Without them the readers take the log for one
	// cut short, its blocks live at the cut.
	for p := 0; p < g.o.procs; p++ {
		g.ts++
		g.b = logfmt.AppendProc(g.b, logfmt.Proc{Event: logfmt.ProcExit, PID: int64(4242 + p), TS: g.ts, HasStatus: true})
	}
	g.b = logfmt.AppendSummary(g.b, logfmt.Summary{Events: uint64(g.written), Lost: uint64(g.o.lost)})
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
