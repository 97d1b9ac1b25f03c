//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
)

// hotFuncs are the functions whose probe placement matters for cost; a
// fallback to a single-stepped instruction on one of them is worth a
// warning. The others (nothrow new, syscall wrappers) are rarely hot.
var hotFuncs = map[string]bool{
	"malloc": true, "calloc": true, "realloc": true, "free": true,
	"_Znwm": true, "_Znam": true, "_ZdlPv": true, "_ZdaPv": true, "_ZdlPvm": true, "_ZdaPvm": true,
	"_Znwj": true, "_Znaj": true, "_ZdlPvj": true, "_ZdaPvj": true,
}

// AttachLibrary probes the allocation functions of the library at path
// (seen from memtrace: use /proc/PID/root/... for a process in another
// mount namespace) for process pid. It returns false, nil when the library
// exports no allocation functions, and does nothing when that library file
// is already probed for pid.
func (t *Tracer) AttachLibrary(pid int, path string) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if t.unw != nil {
		// Its unwind table, before the program maps it (ld.so does
		// that after exec): the kernel side finds it by the file.
		t.unw.loadPath(path)
	}
	key := attachKey{pid: pid, dev: uint64(st.Dev), ino: st.Ino}
	t.mu.Lock()
	_, done := t.links[key]
	t.mu.Unlock()
	if done {
		return false, nil
	}
	pps, err := resolveLib(path)
	if errors.Is(err, ErrNoAllocFuncs) {
		t.mu.Lock()
		t.links[key] = nil
		t.mu.Unlock()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return false, fmt.Errorf("open %s for uprobes: %w", path, err)
	}
	var ls []link.Link
	if t.multi {
		ls, err = t.attachMulti(ex, path, pid, pps)
		if errors.Is(err, ebpf.ErrNotSupported) {
			t.multi = false
		}
	}
	if !t.multi {
		ls, err = t.attachClassic(ex, pid, pps)
	}
	if err != nil {
		for _, l := range ls {
			l.Close()
		}
		return false, fmt.Errorf("attach uprobes to %s in process %d: %w", path, pid, err)
	}
	if err := t.markAllocLib(pps, &st); err != nil {
		for _, l := range ls {
			l.Close()
		}
		return false, err
	}
	t.mu.Lock()
	t.links[key] = ls
	for _, pp := range pps {
		if !pp.placed && hotFuncs[pp.symbol] {
			t.fellBack[pp.symbol] = true
		}
	}
	t.mu.Unlock()
	return true, nil
}

// progs returns the programs of the link kind in use, loading those New
// deferred (ensure); enter and ret only when alloc is set, since a session
// link needs neither.
func (t *Tracer) progs(alloc bool) (enter, ret, free, nw *ebpf.Program, err error) {
	if t.opts.Floor {
		e, st := t.objs.MtEmpty, t.objs.MtFloorStack
		if t.multi {
			e, st = t.objs.MtEmptyMulti, t.objs.MtFloorStackMulti
		}
		if t.opts.StackDepth > 0 {
			// Stacks are taken once per call, at its entry.
			return st, e, st, st, nil
		}
		return e, e, e, e, nil
	}
	o := &t.objs
	fn, a := []**ebpf.Program{&o.MtFree, &o.MtNew}, []**ebpf.Program{&o.MtEnter, &o.MtReturn}
	if t.multi {
		fn, a = []**ebpf.Program{&o.MtFreeMulti, &o.MtNewMulti}, []**ebpf.Program{&o.MtEnterMulti, &o.MtReturnMulti}
	}
	need := fn
	if alloc {
		need = append(need, a...)
	}
	if err := t.ensure(need...); err != nil {
		return nil, nil, nil, nil, err
	}
	return *a[0], *a[1], *fn[0], *fn[1], nil
}

// cookie says which internal-call test applies at pp: for the mmap
// family, whether the caller lies in the module's text; for free on x86
// (MT_SIG_FREE_CHECKED), whether it is a direct call from there.
func (pp *probePoint) cookie(checkInternal bool) uint64 {
	sig, delta := pp.def.sig, uint64(0)
	var before, after uint64
	switch {
	case pp.def.sig == sigMmap || pp.def.sig == sigMremap || pp.def.op == event.OpMunmap:
		before, after = pp.textFrom, pp.textTo
	case pp.alias:
		// Named by the PLT stub called (MT_CK_ALIAS): an allocator's
		// free is also its delete, and has no libc-internal callers.
		return cookie(uint8(pp.def.op), sig, 0, 0, 0) | 1<<ckAliasShift
	case pp.def.op == event.OpFree && pp.x86 && pp.delta < 1<<ckFreeDeltaBits && checkInternal:
		sig, delta = sigFreeChecked, pp.delta
		before, after = pp.textFrom, pp.textTo
	}
	return cookie(uint8(pp.def.op), sig, delta, before, after)
}

func (t *Tracer) attachMulti(ex *link.Executable, path string, pid int, pps []probePoint) ([]link.Link, error) {
	_, _, free, nw, err := t.progs(false)
	if err != nil {
		return nil, err
	}
	var allocAddr, allocCookie, freeAddr, freeCookie, newAddr, newCookie, retAddr, retCookie []uint64
	for i := range pps {
		pp := &pps[i]
		switch pp.def.kind {
		case probeNewRet:
			retAddr = append(retAddr, pp.fileOff)
			retCookie = append(retCookie, 0)
		case probeAlloc:
			allocAddr = append(allocAddr, pp.fileOff)
			allocCookie = append(allocCookie, pp.cookie(t.opts.CheckInternalFrees))
		case probeFree:
			freeAddr = append(freeAddr, pp.fileOff)
			freeCookie = append(freeCookie, pp.cookie(t.opts.CheckInternalFrees))
		case probeNew:
			newAddr = append(newAddr, pp.fileOff)
			newCookie = append(newCookie, pp.cookie(t.opts.CheckInternalFrees))
		}
	}
	var ls []link.Link
	if len(allocAddr) > 0 && t.session {
		// The floor uses the same kind of link, with an empty program.
		if !t.opts.Floor {
			if err := t.ensure(&t.objs.MtSession); err != nil {
				return nil, err
			}
		}
		prog := t.objs.MtSession
		if t.opts.Floor {
			prog = t.objs.MtEmptySession
			if t.opts.StackDepth > 0 {
				prog = t.objs.MtFloorStackSession
			}
		}
		l, err := createSessionLink(prog, path, allocAddr, allocCookie, pid)
		if err == nil {
			ls = append(ls, l)
			allocAddr = nil
		} else if errors.Is(err, errNoSession) {
			t.session = false
		} else {
			return ls, err
		}
	}
	if len(allocAddr) > 0 {
		enter, ret, _, _, err := t.progs(true)
		if err != nil {
			return ls, err
		}
		opts := &link.UprobeMultiOptions{Addresses: allocAddr, Cookies: allocCookie, PID: uint32(pid)}
		l, err := ex.UprobeMulti(nil, enter, opts)
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
		l, err = ex.UretprobeMulti(nil, ret, opts)
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	for _, g := range []struct {
		prog          *ebpf.Program
		addr, cookies []uint64
	}{{free, freeAddr, freeCookie}, {nw, newAddr, newCookie}, {t.newRetProg(), retAddr, retCookie}} {
		if len(g.addr) == 0 {
			continue
		}
		l, err := ex.UprobeMulti(nil, g.prog, &link.UprobeMultiOptions{Addresses: g.addr, Cookies: g.cookies, PID: uint32(pid)})
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func (t *Tracer) attachClassic(ex *link.Executable, pid int, pps []probePoint) ([]link.Link, error) {
	enter, ret, free, nw, err := t.progs(true)
	if err != nil {
		return nil, err
	}
	var ls []link.Link
	for i := range pps {
		pp := &pps[i]
		ck := pp.cookie(t.opts.CheckInternalFrees)
		uprobe := func(p *ebpf.Program, ret bool) error {
			c := ck
			if ret {
				c = retCookie(pid)
			}
			p, c, err := t.probeProg(p, c)
			if err != nil {
				return err
			}
			opts := &link.UprobeOptions{Address: pp.fileOff, PID: pid, Cookie: c}
			var l link.Link
			if ret {
				l, err = ex.Uretprobe(pp.symbol, p, opts)
			} else {
				l, err = ex.Uprobe(pp.symbol, p, opts)
			}
			if err == nil {
				ls = append(ls, l)
			}
			return err
		}
		if pp.def.kind != probeAlloc {
			prog := free
			if pp.def.kind == probeNew {
				prog = nw
			}
			if pp.def.kind == probeNewRet {
				prog = t.newRetProg()
			}
			if err := uprobe(prog, false); err != nil {
				return ls, err
			}
			continue
		}
		if err := uprobe(enter, false); err != nil {
			return ls, err
		}
		if err := uprobe(ret, true); err != nil {
			return ls, err
		}
	}
	return ls, nil
}

// ScanProcess probes every mapped library of pid that exports allocation
// functions and is not probed yet (dlopen'ed allocators included). It
// returns the paths newly probed, as /proc/PID/maps names them.
func (t *Tracer) ScanProcess(pid int) ([]string, error) {
	maps, err := readExecMaps(pid)
	if err != nil {
		return nil, err
	}
	var added []string
	seen := map[fileID]bool{}
	for _, m := range maps {
		if seen[m.id] {
			continue
		}
		seen[m.id] = true
		p, ok := mappedFile(pid, m)
		if !ok || !isELF(p) {
			continue
		}
		ok, err := t.AttachLibrary(pid, p)
		if err != nil {
			return added, err
		}
		if ok {
			added = append(added, m.path)
		}
	}
	if t.unw != nil {
		if err := t.unw.updateProcess(pid, true); err != nil {
			return added, err
		}
		if err := t.watchLoader(pid); err != nil {
			return added, err
		}
	}
	return added, nil
}

// mappedFile names the file of mapping m of pid by a path memtrace opens
// it by: /proc/PID/map_files, which is that file whatever its path; else
// its maps path, which is relative to memtrace's root for a process in
// memtrace's mount namespace (a chroot'ed one too) and to the process's
// own namespace root otherwise, so it is tried in both, and taken only
// where it leads to the file mapped (the same device and inode).
func mappedFile(pid int, m procMapping) (string, bool) {
	mf := procfs.MapFile(pid, m.start, m.end)
	if _, err := os.Stat(mf); err == nil {
		return mf, true
	}
	for _, p := range []string{procfs.Dir(pid) + "/root" + m.path, m.path} {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue
		}
		if kernelDev(uint64(unix.Major(st.Dev)), uint64(unix.Minor(st.Dev))) == m.id.dev && st.Ino == m.id.ino {
			return p, true
		}
	}
	return "", false
}
