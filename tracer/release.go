//go:build amd64 || arm64

package tracer

import (
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Values of the BPF hold map (bpf/memtrace.bpf.c).
const (
	holdPending = 1 // a forked child that stops at its first instruction
	holdStopped = 2 // stopped by the kernel side, waiting for Resume
	// holdDL marks the key of a dlopen hold (MT_HOLD_DL): the pid with
	// this bit.
	holdDL = 0x80000000
	// holdPIDMask keeps the pid of a dlopen hold's key (MT_HOLD_SEQ_SHIFT).
	holdPIDMask = 1<<22 - 1
)

// Resume lets a process the kernel side held (FlagHeld) go on, and forgets
// the hold so that the watchdog does not resume it a second time.
func (t *Tracer) Resume(pid int) error {
	err := syscall.Kill(pid, syscall.SIGCONT)
	_ = t.objs.Hold.Delete(uint32(pid))
	return err
}

// HoldFD is the descriptor of the map of held processes. memtrace hands a
// copy to its watchdog process, which resumes every held process when
// memtrace dies, however it dies.
func (t *Tracer) HoldFD() int { return t.objs.Hold.FD() }

// ResumeHeld resumes every process the hold map says is stopped, through
// the map at fd: the watchdog's sweep, after memtrace is gone.
func ResumeHeld(fd int) (int, error) {
	m, err := ebpf.NewMapFromFD(fd)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	var (
		pid   uint32
		state uint8
		held  []uint32
	)
	it := m.Iterate()
	for it.Next(&pid, &state) {
		if state == holdStopped {
			held = append(held, pid)
		}
	}
	for _, p := range held {
		pid := p
		if p&holdDL != 0 {
			pid &= holdPIDMask
		}
		_ = syscall.Kill(int(pid), syscall.SIGCONT)
		_ = m.Delete(p)
	}
	return len(held), it.Err()
}

// ReleaseProcess drops an exited process: it leaves the BPF filter and its
// links are closed in the background. Closing a uprobe link waits for an
// RCU grace period (tens of ms), and a --follow run may see thousands of
// children, so neither the reader nor the file-descriptor limit may wait
// for memtrace's exit.
func (t *Tracer) ReleaseProcess(pid int) {
	_ = t.objs.Targets.Delete(uint32(pid))
	_ = t.objs.Hold.Delete(uint32(pid))
	if t.unw != nil {
		t.unw.forget(pid)
	}
	var ls []link.Link
	t.mu.Lock()
	for k, kl := range t.links {
		if k.pid == pid {
			ls = append(ls, kl...)
			delete(t.links, k)
		}
	}
	t.mu.Unlock()
	if len(ls) > 0 {
		t.closing.Add(1)
		go func() {
			defer t.closing.Done()
			closeLinks(ls)
		}()
	}
}

// closeLinks closes links concurrently: each close waits for a grace
// period, and concurrent waits share one.
func closeLinks(ls []link.Link) {
	const workers = 16
	var wg sync.WaitGroup
	ch := make(chan link.Link)
	for i := 0; i < min(workers, len(ls)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range ch {
				l.Close()
			}
		}()
	}
	for _, l := range ls {
		if l != nil {
			ch <- l
		}
	}
	close(ch)
	wg.Wait()
}
