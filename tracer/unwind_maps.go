//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
)

// remap answers an mt_remap record: the kernel side lacks mappings of
// pid, or (hold) ld.so has mapped a library and the process waits, its
// hold recorded under key.
func (t *Tracer) remap(pid int, hold bool, key uint32) {
	if hold {
		// Resumed whatever happens: the tables are only a means.
		defer func() { _ = letGo(t.objs.Hold, pid, key) }()
	}
	if err := t.unw.updateProcess(pid, hold); err != nil {
		t.unw.log("memtrace: process %d: %v", pid, err)
	}
}

// procMapping is one executable file mapping from /proc/PID/maps.
type procMapping struct {
	start, end, offset uint64
	id                 fileID
	path               string
}

// readExecMaps returns pid's executable file mappings with their files'
// device and inode.
func readExecMaps(pid int) ([]procMapping, error) {
	pms, err := procfs.ReadMaps(pid)
	if err != nil && !errors.Is(err, procfs.ErrBadMaps) {
		return nil, err
	}
	// A line that does not parse is one mapping the walk follows frame
	// pointers through; the others still get their tables.
	var out []procMapping
	for i := range pms {
		if m, ok := execMapping(&pms[i]); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// execMapping is pm when it maps a file executable, by its name less the
// " (deleted)" mark.
func execMapping(pm *procfs.Mapping) (procMapping, bool) {
	if !pm.Exec() || !pm.FileBacked() {
		return procMapping{}, false
	}
	return procMapping{start: pm.Start, end: pm.End, offset: pm.Offset,
		id: fileID{kernelDev(uint64(pm.Major), uint64(pm.Minor)), pm.Inode}, path: pm.File()}, true
}

// umap is one entry of a process's mapping array.
type umap struct {
	start, end, base uint64
	at               utable
}

// mappingsFor turns a process's executable mappings into its array
// entries, building the tables of files not seen before. open names the
// file of a mapping as memtrace can open it.
func (u *unwinder) mappingsFor(maps []procMapping, open func(procMapping) string) []umap {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]umap, 0, len(maps))
	for _, m := range maps {
		e := umap{start: m.start, end: m.end}
		if lt := u.tableLocked(m.id, open(m)); lt != nil {
			if bias, ok := lt.table.Bias(m.start, m.offset); ok {
				e.base = bias + lt.base
				e.at = lt.at
			}
		}
		// A mapping without a table is listed too: the walk then
		// follows the frame pointer there instead of asking again.
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

func encodeUmaps(ms []umap, gen uint32) []byte {
	if len(ms) > uMaxMaps {
		ms = ms[:uMaxMaps]
	}
	b := make([]byte, uMapsSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(ms)))
	le.PutUint32(b[4:], gen)
	for i, m := range ms {
		o := 8 + i*uMapSize
		le.PutUint64(b[o:], m.start)
		le.PutUint64(b[o+8:], m.end)
		le.PutUint64(b[o+16:], m.base)
		m.at.put(b[o+24:])
	}
	// Past n, entries that end above every user address: the kernel
	// side's branchless search needs the whole array sorted by end.
	for i := len(ms); i < uMaxMaps; i++ {
		o := 8 + i*uMapSize
		le.PutUint64(b[o:], uMapsPad)
		le.PutUint64(b[o+8:], uMapsPad)
	}
	return b
}

// uMapsPad starts and ends the unused entries of a mapping array.
const uMapsPad = 1 << 62

// updateProcess writes pid's mapping array from /proc/PID/maps. Then
// the kernel side may ask again at its next miss (mt_remap) if the
// periodic rescan asks for it (clear) or the array changed: a request
// that changed nothing (a stray frame pointer into a data mapping) is
// not answered again before the next rescan.
func (u *unwinder) updateProcess(pid int, clear bool) error {
	at := monotonicNS()
	maps, err := readExecMaps(pid)
	if err != nil {
		return err
	}
	// A root that reads "/" is not enough: in a mount namespace of its
	// own, a bind mount can put another file under a host path.
	own := procfs.SameFS(pid)
	root := procfs.Dir(pid) + "/root"
	ms := u.mappingsFor(maps, func(m procMapping) string {
		// map_files opens the mapped file itself, even when its path
		// is in another mount namespace or was replaced since.
		p := procfs.MapFile(pid, m.start, m.end)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return root + m.path
	})
	if len(ms) > uMaxMaps {
		u.log("memtrace: process %d has %d executable mappings; stacks use the first %d", pid, len(ms), uMaxMaps)
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].start < maps[j].start })
	u.mu.Lock()
	changed := !slices.Equal(u.written[pid], ms)
	u.written[pid] = ms
	u.seen[pid] = maps
	u.readAt[pid] = at
	u.ownRoot[pid] = own
	u.mu.Unlock()
	if changed {
		// A new number for each write: the walk's replay reuses a kept
		// step's mapping only within the array it was found in
		// (bpf/memtrace.h, mt_umaps.gen).
		gen := u.gen.Add(1)
		if gen == 0 {
			gen = u.gen.Add(1)
		}
		if err := u.procs.Put(uint32(pid), encodeUmaps(ms, gen)); err != nil {
			return fmt.Errorf("write the mappings of process %d for the stack walk: %w", pid, err)
		}
	}
	if clear || changed {
		_ = u.stale.Delete(uint32(pid))
	}
	return nil
}

// forget drops an exited process's mappings, and returns its dlopen hook
// (nil if none) for the caller to close with its other links: a close
// waits for a grace period, which must not hold up the next process's
// release.
func (u *unwinder) forget(pid int) link.Link {
	u.mu.Lock()
	delete(u.written, pid)
	delete(u.seen, pid)
	delete(u.readAt, pid)
	delete(u.ownRoot, pid)
	ll, had := u.loader[pid]
	delete(u.loader, pid)
	u.mu.Unlock()
	_ = u.procs.Delete(uint32(pid))
	_ = u.stale.Delete(uint32(pid))
	if had {
		return ll.l
	}
	return nil
}

// fillFrames locates the frames whose VMA the kernel side could not read
// (bpf_find_vma only try-locks the process's mappings, and fails while
// another thread changes them) through the mappings last read, and
// returns the files it named that way for the first time, so that the
// frames resolve after the process has gone. A frame in none of them,
// when the mappings were read before the stack was taken (ts, CLOCK_MONOTONIC
// ns), is in a library mapped since (dlopen): the mappings are read again
// once, while the library is most likely still there.
func (u *unwinder) fillFrames(pid uint32, ts uint64, frames []event.Frame) []event.File {
	named, missed := u.fillFramesOnce(pid, frames)
	if missed {
		u.mu.Lock()
		stale := u.readAt[int(pid)] < ts
		u.mu.Unlock()
		if stale && u.updateProcess(int(pid), false) == nil {
			more, _ := u.fillFramesOnce(pid, frames)
			named = append(named, more...)
		}
	}
	return named
}

func (u *unwinder) fillFramesOnce(pid uint32, frames []event.Frame) (named []event.File, missed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	maps := u.seen[int(pid)]
	for i := range frames {
		f := &frames[i]
		if f.Ino != event.InoUnknown {
			continue
		}
		j := sort.Search(len(maps), func(j int) bool { return maps[j].end > f.Addr })
		if j == len(maps) || maps[j].start > f.Addr {
			missed = true
			continue
		}
		m := maps[j]
		f.Ino, f.FileOff = m.id.ino, f.Addr-m.start+m.offset
		// The root is judged when the maps were read: the stack is
		// often decoded after the process has gone.
		if !u.named[m.id.ino] && u.ownRoot[int(pid)] {
			u.named[m.id.ino] = true
			named = append(named, event.File{Ino: m.id.ino, Path: m.path})
		}
	}
	return named, missed
}

// monotonicNS is CLOCK_MONOTONIC, the clock of the kernel side's times.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
