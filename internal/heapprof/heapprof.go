package heapprof

import (
	"debug/elf"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/symbols"
)

// Frame is one frame as the log names it: the module's path as the traced
// process names it, the mangled symbol ("" when none covers it), the offset
// from the symbol (from the module's base without one) and the address in
// the process; offsets and addresses are return addresses.
type Frame struct {
	Module, Symbol string
	Offset, Addr   uint64
}

// Sample is the figures of one call stack in one process.
type Sample struct {
	PID     int64
	Process string  // the process's name, a label when set
	Stack   []Frame // innermost first: Stack[0] called the allocation function
	// NoStack names a sample without frames ("malloc"): it becomes one
	// pseudo-frame "[no stack] malloc".
	NoStack string

	AllocObjects, AllocBytes int64
	InuseObjects, InuseBytes int64
	PeakObjects, PeakBytes   int64
	Labels                   map[string]string
}

// Options says what the encoder may look up and what to add.
type Options struct {
	// Symbols names source lines and inlined frames and supplies build
	// IDs; nil leaves frames as logged (function names only).
	Symbols *symbols.Cache
	// Peak adds the peak_objects and peak_space sample types.
	Peak bool
	// Main is each process's executable, whose mapping goes first (pprof
	// names a profile after its first mapping); "" guesses it from the
	// stacks' outermost frames.
	Main map[int64]string
	// Root, when set, is the prefix under which a process's files are
	// opened (/proc/PID/root for a process in another mount namespace).
	Root func(pid int64) string
	// PIDLabel labels every sample with its pid and process name, string
	// labels (several processes).
	PIDLabel bool

	// TimeNanos is when the profile was taken. DurationNanos is a delta
	// profile's window and must stay 0 on a snapshot: Parca and Pyroscope
	// read a profile with a duration as a delta, per second and summed
	// over time.
	TimeNanos, DurationNanos int64
	Comments                 []string
	// Period is the profile's period in bytes: under --sample its mean
	// bytes between samples, as Go's heap profiles carry
	// runtime.MemProfileRate (the values are already scaled: pprof does
	// not scale them again). 0 means 1: every allocation.
	Period int64
	// DefaultSampleType is what pprof shows first; "" means
	// DefaultSampleType (an allocs profile says alloc_space).
	DefaultSampleType string
}

// SampleTypes are the sample types in order; the peak's two come last,
// only with Options.Peak.
var SampleTypes = []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "peak_objects", "peak_space"}

// DefaultSampleType is what pprof shows without -sample_index.
const DefaultSampleType = "inuse_space"

// Write encodes samples as a gzipped profile.proto.
func Write(w io.Writer, samples []Sample, o *Options) error {
	p, err := Build(samples, o)
	if err != nil {
		return err
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// segment is one executable PT_LOAD of a file.
type segment struct{ vaddr, memsz, off uint64 }

type fileInfo struct {
	segs []segment
	ok   bool
}

// files memoizes the program headers of the modules met, for every
// profile memtrace writes in its life (a live endpoint is asked again and
// again); bounded by the files the traced processes map.
var files = struct {
	sync.Mutex
	m map[string]*fileInfo
}{m: map[string]*fileInfo{}}

func readFileInfo(path string) *fileInfo {
	files.Lock()
	fi, ok := files.m[path]
	files.Unlock()
	if ok {
		return fi
	}
	fi = &fileInfo{}
	if f, err := elf.Open(path); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
				fi.segs = append(fi.segs, segment{p.Vaddr, p.Memsz, p.Off})
			}
		}
		fi.ok = len(fi.segs) > 0
		f.Close()
	}
	files.Lock()
	if len(files.m) > 4096 {
		clear(files.m) // a --follow run over many rebuilt binaries
	}
	files.m[path] = fi
	files.Unlock()
	return fi
}

const pageMask = 4095

type mapKey struct {
	pid    int64
	module string
}

type modMaps struct {
	maps  []*profile.Mapping // one per executable segment, or one without range
	bias  uint64
	known bool // bias known: addresses can be checked against ranges
}

type builder struct {
	o     *Options
	p     *profile.Profile
	maps  map[mapKey]*modMaps
	funcs map[[3]string]*profile.Function
	locs  map[string]*profile.Location
}

// Build makes the profile of samples; it passes profile.CheckValid.
func Build(samples []Sample, o *Options) (*profile.Profile, error) {
	if o == nil {
		o = &Options{}
	}
	n := 4
	if o.Peak {
		n = 6
	}
	period, def := o.Period, o.DefaultSampleType
	if period <= 0 {
		period = 1
	}
	if def == "" {
		def = DefaultSampleType
	}
	p := &profile.Profile{
		DefaultSampleType: def,
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            period,
		TimeNanos:         o.TimeNanos,
		DurationNanos:     o.DurationNanos,
		Comments:          o.Comments,
	}
	for i, t := range SampleTypes[:n] {
		unit := "count"
		if i%2 == 1 {
			unit = "bytes"
		}
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: t, Unit: unit})
	}
	b := &builder{o: o, p: p, maps: map[mapKey]*modMaps{}, funcs: map[[3]string]*profile.Function{}, locs: map[string]*profile.Location{}}
	mains := b.mains(samples)
	// The executables' mappings first, in pid order: pprof names the
	// profile after the first mapping ("File: app").
	pids := make([]int64, 0, len(mains))
	for pid := range mains {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		b.mappings(pid, mains[pid], firstFrame(samples, pid, mains[pid]))
	}
	for i := range samples {
		s := &samples[i]
		v := []int64{s.AllocObjects, s.AllocBytes, s.InuseObjects, s.InuseBytes, s.PeakObjects, s.PeakBytes}[:n]
		if allZero(v) {
			continue
		}
		smp := &profile.Sample{Value: v}
		if len(s.Stack) == 0 {
			name := "[no stack] " + s.NoStack
			smp.Location = []*profile.Location{b.pseudo(name)}
		}
		for k := range s.Stack {
			smp.Location = append(smp.Location, b.location(s.PID, &s.Stack[k]))
		}
		if o.PIDLabel {
			// A string label, not a numeric one: Parca and Pyroscope make
			// series labels of string labels only, and one form keeps
			// pprof's -tags from listing the pid twice.
			smp.Label = map[string][]string{"pid": {strconv.FormatInt(s.PID, 10)}}
			if s.Process != "" {
				smp.Label["process"] = []string{s.Process}
			}
		}
		for k, v := range s.Labels {
			if smp.Label == nil {
				smp.Label = map[string][]string{}
			}
			smp.Label[k] = []string{v}
		}
		p.Sample = append(p.Sample, smp)
	}
	for i, m := range p.Mapping {
		m.ID = uint64(i + 1)
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("build pprof profile: %w (memtrace's bug: please report it)", err)
	}
	return p, nil
}

func allZero(v []int64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// mains names each process's executable: the one given, or the module of
// the outermost frames (_start lies in the executable) that is met most.
func (b *builder) mains(samples []Sample) map[int64]string {
	out := map[int64]string{}
	votes := map[mapKey]int{}
	for i := range samples {
		s := &samples[i]
		if m := b.o.Main[s.PID]; m != "" {
			out[s.PID] = m
			continue
		}
		if len(s.Stack) > 0 {
			if m := s.Stack[len(s.Stack)-1].Module; m != "" {
				votes[mapKey{s.PID, m}]++
			}
		}
	}
	best := map[int64]int{}
	keys := make([]mapKey, 0, len(votes))
	for k := range votes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b mapKey) int {
		if a.module < b.module {
			return -1
		}
		if a.module > b.module {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		if _, given := b.o.Main[k.pid]; given && b.o.Main[k.pid] != "" {
			continue
		}
		if votes[k] > best[k.pid] {
			best[k.pid], out[k.pid] = votes[k], k.module
		}
	}
	return out
}

// open is the path under which memtrace reads a process's file.
func (b *builder) open(pid int64, module string) string {
	if b.o.Root != nil {
		return b.o.Root(pid) + module
	}
	return module
}

// mappings returns the mappings of module in process pid, made the first
// time from the file's executable segments and the load bias that f (a
// frame in it, nil if none yet) gives.
func (b *builder) mappings(pid int64, module string, f *Frame) *modMaps {
	k := mapKey{pid, module}
	if mm, ok := b.maps[k]; ok {
		return mm
	}
	mm := &modMaps{}
	b.maps[k] = mm
	path := b.open(pid, module)
	var buildID string
	if b.o.Symbols != nil {
		if m, err := b.o.Symbols.Open(path); err == nil {
			buildID = m.BuildID()
			if f != nil && f.Addr != 0 {
				v, ok := f.Offset, true
				if f.Symbol != "" {
					sv, err := m.SymbolValue(f.Symbol)
					v, ok = sv+f.Offset, err == nil
				}
				if ok && f.Addr >= v {
					mm.bias, mm.known = f.Addr-v, true
				}
			}
		}
	}
	fi := readFileInfo(path)
	hasNames := b.o.Symbols != nil
	if mm.known && fi.ok {
		for _, s := range fi.segs {
			mm.maps = append(mm.maps, &profile.Mapping{
				Start: mm.bias + s.vaddr&^pageMask, Limit: mm.bias + s.vaddr + s.memsz, Offset: s.off &^ pageMask,
				File: module, BuildID: buildID, HasFunctions: true, HasFilenames: hasNames, HasLineNumbers: hasNames, HasInlineFrames: hasNames,
			})
		}
	} else {
		mm.maps = []*profile.Mapping{{File: module, BuildID: buildID, HasFunctions: true, HasFilenames: hasNames, HasLineNumbers: hasNames, HasInlineFrames: hasNames}}
	}
	b.p.Mapping = append(b.p.Mapping, mm.maps...)
	return mm
}

func (b *builder) function(name, system, file string) *profile.Function {
	k := [3]string{name, system, file}
	if f, ok := b.funcs[k]; ok {
		return f
	}
	f := &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: system, Filename: file}
	b.p.Function = append(b.p.Function, f)
	b.funcs[k] = f
	return f
}

func (b *builder) pseudo(name string) *profile.Location {
	k := "\x00" + name
	if l, ok := b.locs[k]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Line: []profile.Line{{Function: b.function(name, name, "")}}}
	b.p.Location = append(b.p.Location, l)
	b.locs[k] = l
	return l
}

func (b *builder) location(pid int64, f *Frame) *profile.Location {
	var mp *profile.Mapping
	addr := f.Addr
	if addr > 0 {
		addr-- // the call instruction
	}
	key := ""
	if f.Module != "" {
		mm := b.mappings(pid, f.Module, f)
		mp = mm.maps[0]
		for _, m := range mm.maps {
			if m.Start <= addr && addr < m.Limit {
				mp = m
			}
		}
		key = strconv.FormatInt(pid, 10) + "\x00" + f.Module
	}
	if addr != 0 {
		key += "\x00" + strconv.FormatUint(addr, 16)
	} else {
		key += "\x00" + f.Symbol + "+" + strconv.FormatUint(f.Offset, 16)
	}
	if l, ok := b.locs[key]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: mp, Address: addr, Line: b.lines(pid, f)}
	b.p.Location = append(b.p.Location, l)
	b.locs[key] = l
	return l
}

// lines names a frame: with DWARF, every inlined function at the call,
// innermost first, each with its file:line; without, the symbol alone.
func (b *builder) lines(pid int64, f *Frame) []profile.Line {
	if b.o.Symbols != nil && f.Module != "" && f.Module[0] == '/' {
		if sf, err := b.o.Symbols.SourceFrames(b.open(pid, f.Module), f.Symbol, f.Offset); err == nil && len(sf) > 0 {
			out := make([]profile.Line, len(sf))
			for i, s := range sf {
				sys := s.Function
				if i == len(sf)-1 && f.Symbol != "" {
					sys = f.Symbol // the physical function: its ELF name, as logged
				}
				name := symbols.Demangle(sys)
				if name == "" {
					name = frameName(f)
				}
				out[i] = profile.Line{Function: b.function(name, sys, s.File), Line: int64(s.Line)}
			}
			return out
		}
	}
	name := frameName(f)
	sys := f.Symbol
	if sys == "" {
		sys = name
	}
	return []profile.Line{{Function: b.function(name, sys, "")}}
}

// frameName is a frame's name without source information: its function
// demangled, or module+0xOFF, or its address.
func frameName(f *Frame) string {
	switch {
	case f.Symbol != "":
		return symbols.Demangle(f.Symbol)
	case f.Module != "":
		return f.Module + "+0x" + strconv.FormatUint(f.Offset, 16)
	}
	return "0x" + strconv.FormatUint(f.Addr, 16)
}

// firstFrame is a frame of module in process pid with an address (nil if
// none), which gives the module's load bias.
func firstFrame(samples []Sample, pid int64, module string) *Frame {
	for i := range samples {
		if samples[i].PID != pid {
			continue
		}
		for k := range samples[i].Stack {
			if f := &samples[i].Stack[k]; f.Module == module && f.Addr != 0 {
				return f
			}
		}
	}
	return nil
}
