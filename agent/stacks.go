package agent

import (
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/stackz"
	"github.com/memtrace/memtrace/logfmt"
)

// A stack as it goes into the log: resolved once, written after every
// event that carries it.
type stackInfo struct {
	tgid      uint32
	ts        uint64 // CLOCK_MONOTONIC ns the kernel side took it at
	raw       []event.Frame
	frames    []Frame
	stop      event.StopReason
	resolved  bool
	truncated string // "" or the reason: depth, fp, no-unwind-info, bad-read
	// text is the stack's lines as the log has them after each of its
	// events, formatted once (formatted): with 20 frames and more,
	// formatting them for every event was most of the agent's time.
	text      []byte
	formatted bool
}

// Frame is a frame named: its module (the file's path as the traced
// process names it), symbol (mangled; "" when none covers it), the offset
// from the symbol (or from the module without one) and the address.
type Frame struct {
	Module, Symbol string
	Offset, Addr   uint64
}

// Frame-pointer walks that reach one of these have reached the bottom of
// the stack; one that stops elsewhere was cut short.
var rootSymbols = map[string]bool{
	"_start": true, "__libc_start_main": true, "__libc_start_call_main": true,
	"start_thread": true, "clone": true, "clone3": true, "__clone": true, "__clone3": true,
	"thread_start": true, "__libc_start_main_impl": true,
}

// Event queues an event (event.Handler). Process events are also handed
// to Config.OnProcess at once: a held process waits for it.
func (s *Session) Event(e *event.Event) {
	if (e.Kind == event.KindFork || e.Kind == event.KindExec) && s.cfg.OnProcess != nil {
		s.cfg.OnProcess(e)
		if e.Kind == event.KindExec && s.cfg.LetGo != nil && s.cfg.LetGo(e.TGID) {
			return
		}
	}
	s.Add(e)
}

// File learns the path of an inode that frames lie in (event.Handler).
func (s *Session) File(f *event.File) {
	if f.Truncated {
		return
	}
	if _, known := s.calls.byIno[f.Ino]; !known {
		s.calls.byIno[f.Ino] = f.Path
	}
}

// Stack records a stack the kernel side sent; events refer to it by ID
// (event.Handler).
func (s *Session) Stack(st *event.Stack) {
	if s.stacks == nil {
		s.stacks = map[uint64]*stackInfo{}
	}
	raw := make([]event.Frame, len(st.Frames))
	copy(raw, st.Frames)
	s.stacks[st.ID] = &stackInfo{tgid: st.TGID, ts: st.TS, raw: raw, stop: st.Stop}
	if !s.cfg.InProcess {
		s.openFiles(int(st.TGID), st.TS, raw)
	}
}

// openFiles makes sure the files a stack's frames lie in are open while
// the process most likely still runs: the stack is named when its event
// is written, after the agent's hold, by when a short-lived process may
// have exited and taken its mount namespace along (and with it the
// library a bind mount showed it under a host path).
func (s *Session) openFiles(pid int, ts uint64, frames []event.Frame) {
	c := s.calls
	as := c.spaces[pid]
	if as == nil {
		return // the agent reads the maps at the process's first event
	}
	for _, f := range frames {
		if f.Ino == 0 || f.Ino == event.InoUnknown {
			continue
		}
		if _, ok := as.LookupFile(f.Addr, f.Ino); ok {
			continue
		}
		if c.readAt[pid] >= ts || !c.firstReread(pid, f.Ino) {
			continue
		}
		s.KnownProcess(pid, false)
	}
}

// ResolvedStack records a stack whose frames the source named itself (the
// preload library, through dladdr in the traced process); events refer to
// it by ID as to the kernel side's stacks. frames is copied.
func (s *Session) ResolvedStack(id uint64, frames []Frame) {
	if s.stacks == nil {
		s.stacks = map[uint64]*stackInfo{}
	}
	s.stacks[id] = &stackInfo{frames: slices.Clone(frames), resolved: true}
}

func (s *Session) writeStack(id uint64) {
	si := s.stacks[id]
	if si == nil {
		s.Stats.StacksMissing++
		s.buf = logfmt.AppendStackMissing(s.buf[:0])
		s.write(s.buf)
		return
	}
	if !si.formatted {
		if !si.resolved {
			s.resolve(si)
		}
		if !s.cfg.NoText {
			for i, f := range si.frames {
				si.text = logfmt.AppendFrame(si.text, i, f.Module, f.Symbol, f.Offset, f.Addr)
			}
			if si.truncated != "" {
				si.text = logfmt.AppendStackTruncated(si.text, si.truncated)
			}
		}
		si.formatted = true
		if s.cfg.Observer != nil {
			s.cfg.Observer.Stack(id, si.frames)
		}
	}
	if s.mw != nil && len(si.text) > 0 && s.err == nil && !s.cfg.NoText {
		s.marks = append(s.marks, stackz.Mark{Off: len(s.out), Len: len(si.text), ID: id, Text: si.text})
		if s.sw != nil {
			// The writer copies the text where the mark is.
			s.apart += len(si.text)
			s.spill()
			return
		}
	}
	s.write(si.text)
}

func (s *Session) resolve(si *stackInfo) {
	si.resolved = true
	pid := int(si.tgid)
	if si.stop != event.StopFPWalk {
		// The DWARF walk says itself why it ended; every frame it
		// found is a real one (a frame in anonymous memory, such as
		// JIT code, included).
		for _, f := range si.raw {
			si.frames = append(si.frames, s.resolveFrame(pid, si.ts, f))
		}
		si.truncated = si.stop.Truncation()
		return
	}
	root := false
	raw := si.raw
	if len(raw) > 1 && raw[1].Addr == raw[0].Addr {
		// Kernels that recognise a probe on "push %rbp" as a function
		// entry add the caller themselves; frame 0 is already it.
		raw = append(raw[:1:1], raw[2:]...)
	}
	for i, f := range raw {
		of := s.resolveFrame(pid, si.ts, f)
		if of.Module == "" && i > 0 {
			// A frame in no mapping: the frame-pointer chain went
			// through code built without frame pointers and read
			// garbage from here on.
			si.truncated = "fp"
			return
		}
		si.frames = append(si.frames, of)
		if rootSymbols[of.Symbol] {
			root = true
			break
		}
	}
	switch {
	case root:
	case s.cfg.StackDepth > 0 && len(si.raw) >= s.cfg.StackDepth:
		si.truncated = "depth"
	default:
		si.truncated = "fp"
	}
}

// resolveFrame names a frame taken at ts (CLOCK_MONOTONIC ns).
func (s *Session) resolveFrame(pid int, ts uint64, f event.Frame) Frame {
	c := s.calls
	of := Frame{Addr: f.Addr}
	if f.Ino == 0 {
		return of
	}
	if f.Ino != event.InoUnknown {
		// Located in its file by the kernel: named from that file
		// or, when it cannot be had, by its path and file offset,
		// never from whatever else the address may map now.
		m, path := s.fileOf(pid, ts, f.Addr, f.Ino)
		if path == "" {
			return of
		}
		of.Module = displayPath(path)
		if m == nil {
			of.Offset = f.FileOff
			return of
		}
		v := m.VAddr(f.FileOff)
		// Return addresses point after the call: look up the call
		// itself (or a trampoline at v), report the offset as given.
		if name, off, err := m.ReturnSymbol(v); err == nil {
			of.Symbol, of.Offset = name, off
		} else {
			of.Offset = v
		}
		return of
	}

	as := c.spaces[pid]
	if as == nil {
		s.KnownProcess(pid, false)
		as = c.spaces[pid]
	}
	if as != nil {
		fr, err := as.Resolve(f.Addr-1, 0)
		if err != nil && fr.Module == "" && c.readAt[pid] < ts {
			// The kernel side could not read the VMA (another thread
			// was changing the mappings) and the maps last read
			// predate the stack: a library mapped since (dlopen).
			s.KnownProcess(pid, false)
			fr, err = as.Resolve(f.Addr-1, 0)
		}
		if err == nil || fr.Module != "" {
			of.Module = displayPath(fr.Module)
			if fr.Symbol != "" {
				of.Symbol, of.Offset = fr.Symbol, fr.Offset+1
			} else {
				of.Offset = fr.ModuleOffset + 1
			}
		}
	}
	return of
}

// displayPath shows a file as the traced process names it.
func displayPath(p string) string {
	if strings.HasPrefix(p, "/proc/") {
		rest := p[len("/proc/"):]
		if i := strings.Index(rest, "/root/"); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				return rest[i+len("/root"):]
			}
		}
	}
	return p
}
