//go:build amd64 || arm64

package tracer

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/procfs"
)

// loaderHook finds a dynamic linker's _dl_debug_state (as a file offset,
// for a uprobe) and _r_debug (an ELF address); zeros for other files.
func loaderHook(path string) (dlState, rDebug uint64) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	if f.Section(".interp") != nil {
		return 0, 0 // a program, not the loader
	}
	vals, err := dynamicSymbolValues(f, "_dl_debug_state", "_r_debug")
	if err != nil {
		return 0, 0
	}
	fn, rd := vals["_dl_debug_state"], vals["_r_debug"]
	if fn == 0 || rd == 0 {
		return 0, 0
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && fn >= p.Vaddr && fn < p.Vaddr+p.Filesz {
			return fn - p.Vaddr + p.Off, rd
		}
	}
	return 0, 0
}

// loaderLink attaches the dlopen hold at file offset off of ex for pid:
// through a uprobe_multi link where the tracer uses them (closing a
// classic uprobe holds the kernel's event_mutex for grace periods, and
// every classic uprobe's attach takes it: under --follow each child's
// hook waited for the last child's close), else a classic uprobe.
func (t *Tracer) loaderLink(ex *link.Executable, off uint64, pid int, cookie uint64) (link.Link, error) {
	if t.multi && t.compat == nil {
		if err := t.ensure(&t.objs.MtDlStateMulti); err != nil {
			return nil, err
		}
		l, err := ex.UprobeMulti(nil, t.objs.MtDlStateMulti,
			&link.UprobeMultiOptions{Addresses: []uint64{off}, Cookies: []uint64{cookie}, PID: uint32(pid)})
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return l, err
		}
	}
	prog, ck, err := t.probeProg(t.objs.MtDlState, cookie)
	if err != nil {
		return nil, err
	}
	return ex.Uprobe("_dl_debug_state", prog, &link.UprobeOptions{Address: off, PID: pid, Cookie: ck})
}

// rStateOff is r_state's offset in struct r_debug (after an int padded
// to 8, r_map and r_brk) on both 64-bit ABIs.
const rStateOff = 24

// watchLoader puts the dlopen hold (mt_dl_state) on pid's dynamic
// linker, or moves it after an exec placed the linker elsewhere.
func (t *Tracer) watchLoader(pid int) error {
	u := t.unw
	u.mu.Lock()
	var path string
	var off, cookie uint64
	for _, m := range u.seen[pid] {
		lt := u.tables[m.id]
		if lt == nil || lt.dlState == 0 {
			continue
		}
		if bias, ok := lt.table.Bias(m.start, m.offset); ok {
			path = procfs.MapFile(pid, m.start, m.end)
			off, cookie = lt.dlState, lt.rDebug+bias+rStateOff
			break
		}
	}
	old, had := u.loader[pid]
	done := u.noLoaders
	u.mu.Unlock()
	if path == "" || done || had && old.cookie == cookie {
		return nil
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("open the dynamic linker of process %d for its dlopen hook: %w", pid, err)
	}
	l, err := t.loaderLink(ex, off, pid, cookie)
	if err != nil {
		return fmt.Errorf("probe the dynamic linker of process %d (dlopen hook): %w", pid, err)
	}
	u.mu.Lock()
	u.loader[pid] = loaderLink{l: l, cookie: cookie}
	u.mu.Unlock()
	if had {
		// In the background: a close waits for a grace period, and a
		// --follow run moves the hook of every child that execs.
		t.closing.Add(1)
		go func() {
			defer t.closing.Done()
			old.l.Close()
		}()
	}
	return nil
}

type loaderLink struct {
	l      link.Link
	cookie uint64
}

// closeLoaders removes every dlopen hook (Release): a process may no
// longer be held at dlopen once nothing reads its request. With give (the
// watchdog's SetHandOff receiver) the hooks are handed over instead, and
// memtrace's own closes only drop references.
func (u *unwinder) closeLoaders(give func(fds []int) error) {
	u.mu.Lock()
	ls := u.loader
	u.loader = map[int]loaderLink{}
	u.noLoaders = true
	u.mu.Unlock()
	var all []link.Link
	for _, ll := range ls {
		all = append(all, ll.l)
	}
	if give != nil && handOff(all, give) == nil {
		for _, l := range all {
			l.Close()
		}
		return
	}
	closeLinks(all)
}
