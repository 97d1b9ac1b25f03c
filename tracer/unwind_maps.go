//go:build amd64 || arm64

package tracer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// remap answers an mt_remap record: the kernel side lacks mappings of
// pid, or (hold) ld.so has mapped a library and the process waits, its
// hold recorded under key.
func (t *Tracer) remap(pid int, hold bool, key uint32) {
	if hold {
		// Resumed whatever happens: the tables are only a means.
		defer func() {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = t.objs.Hold.Delete(key)
		}()
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
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []procMapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMapsLine reads "start-end perms offset major:minor inode path".
func parseMapsLine(line string) (procMapping, bool) {
	var m procMapping
	fields := strings.Fields(line)
	if len(fields) < 6 || len(fields[1]) < 3 || fields[1][2] != 'x' || !strings.HasPrefix(fields[5], "/") {
		return m, false
	}
	se := strings.SplitN(fields[0], "-", 2)
	mm := strings.SplitN(fields[3], ":", 2)
	if len(se) != 2 || len(mm) != 2 {
		return m, false
	}
	var err [6]error
	m.start, err[0] = strconv.ParseUint(se[0], 16, 64)
	m.end, err[1] = strconv.ParseUint(se[1], 16, 64)
	m.offset, err[2] = strconv.ParseUint(fields[2], 16, 64)
	major, e3 := strconv.ParseUint(mm[0], 16, 32)
	minor, e4 := strconv.ParseUint(mm[1], 16, 32)
	err[3], err[4] = e3, e4
	m.id.ino, err[5] = strconv.ParseUint(fields[4], 10, 64)
	for _, e := range err {
		if e != nil {
			return m, false
		}
	}
	if m.id.ino == 0 || m.end <= m.start {
		return m, false
	}
	m.id.dev = kernelDev(major, minor)
	m.path = strings.TrimSuffix(strings.Join(fields[5:], " "), " (deleted)")
	return m, true
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

func encodeUmaps(ms []umap) []byte {
	if len(ms) > uMaxMaps {
		ms = ms[:uMaxMaps]
	}
	b := make([]byte, uMapsSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(ms)))
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
	root := "/proc/" + strconv.Itoa(pid)
	l, err := os.Readlink(root + "/root")
	own := err == nil && l == "/"
	ms := u.mappingsFor(maps, func(m procMapping) string {
		// map_files opens the mapped file itself, even when its path
		// is in another mount namespace or was replaced since.
		p := fmt.Sprintf("%s/map_files/%x-%x", root, m.start, m.end)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return root + "/root" + m.path
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
		if err := u.procs.Put(uint32(pid), encodeUmaps(ms)); err != nil {
			return fmt.Errorf("write the mappings of process %d for the stack walk: %w", pid, err)
		}
	}
	if clear || changed {
		_ = u.stale.Delete(uint32(pid))
	}
	return nil
}

// forget drops an exited process's mappings.
func (u *unwinder) forget(pid int) {
	u.mu.Lock()
	delete(u.written, pid)
	delete(u.seen, pid)
	delete(u.readAt, pid)
	delete(u.ownRoot, pid)
	ll, had := u.loader[pid]
	delete(u.loader, pid)
	u.mu.Unlock()
	if had {
		ll.l.Close()
	}
	_ = u.procs.Delete(uint32(pid))
	_ = u.stale.Delete(uint32(pid))
}

// fillFrames locates the frames whose VMA the kernel side could not read
// (bpf_find_vma only try-locks the process's mappings, and fails while
// another thread changes them) through the mappings last read, and
// returns the files it named that way for the first time, so that the
// frames resolve after the process has gone. A frame in none of them,
// when the mappings were read before the stack was taken (ts, CLOCK_MONOTONIC
// ns), is in a library mapped since (dlopen): the mappings are read again
// once, while the library is most likely still there.
func (u *unwinder) fillFrames(pid uint32, ts uint64, frames []Frame) []File {
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

func (u *unwinder) fillFramesOnce(pid uint32, frames []Frame) (named []File, missed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	maps := u.seen[int(pid)]
	for i := range frames {
		f := &frames[i]
		if f.Ino != InoUnknown {
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
			named = append(named, File{Ino: m.id.ino, Path: m.path})
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
