//go:build amd64 || arm64

package tracer

import (
	"errors"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
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
// for memtrace's exit. Under SetHandOff the links of the last probed
// process, once its threads are all gone, wait for Detach instead (at
// most retireMax).
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
	// Only the last probed process's links wait: while others run the
	// hand-off is far off, and a --follow run's exited children must not
	// hold descriptors (each link is one) until then.
	last := true
	for k := range t.links {
		if k.pid != pid {
			last = false
			break
		}
	}
	keep := t.give != nil && last
	t.mu.Unlock()
	if len(ls) > 0 && keep && exited(pid) {
		// Kept for the hand-off: nothing can hit a dead process's
		// probes, and closing them here would make the exit of a
		// short program wait a grace period (issue 14's start-up).
		t.mu.Lock()
		t.retired = append(t.retired, ls...)
		ls = nil
		if n := len(t.retired) - retireMax; n > 0 {
			ls = append(ls, t.retired[:n]...)
			t.retired = append([]link.Link(nil), t.retired[n:]...)
		}
		t.mu.Unlock()
	}
	if len(ls) > 0 {
		t.closing.Add(1)
		go func() {
			defer t.closing.Done()
			closeLinks(ls)
		}()
	}
}

// retireMax bounds the links of exited processes kept for the hand-off,
// one descriptor each: processes that are each the last one probed when
// they exit (a chain of execs and forks) close the older ones in the
// background, as without a hand-off.
const retireMax = 64

// SetHandOff makes the links of the last probed process, once it has
// exited, wait for Detach instead of being closed in the background
// (ReleaseProcess), so that Detach can
// give them to give, which must take its own reference to each
// descriptor (memtrace's watchdog, over SCM_RIGHTS) before it returns.
// It is for -- mode, where memtrace started every target; AllowHandOff
// says when the hand-off is safe.
func (t *Tracer) SetHandOff(give func(fds []int) error) {
	t.mu.Lock()
	t.give = give
	t.mu.Unlock()
}

// Wake ends the reader's wait for records early: the launcher's word that
// the program has exited, whose last records (its exit among them) would
// otherwise wait for the next poll, up to PollInterval.
func (t *Tracer) Wake() {
	if t.rd != nil {
		t.rd.Wake()
	}
}

// AllowHandOff says that no traced process is alive any more, so that no
// probe can fire for a target: Detach may then give the links away
// rather than wait for the kernel to release each (an RCU tasks-trace
// grace period, ~100 ms). Without it Detach closes them itself.
func (t *Tracer) AllowHandOff() { t.handOffOK.Store(true) }

// handOff gives the descriptors of ls to give; the caller closes ls after
// it, which is then only the dropping of a reference.
func handOff(ls []link.Link, give func([]int) error) error {
	fds := make([]int, 0, len(ls))
	for _, l := range ls {
		if f, ok := l.(interface{ FD() int }); ok && f.FD() >= 0 {
			fds = append(fds, f.FD())
		}
	}
	if len(fds) == 0 {
		return nil
	}
	return give(fds)
}

// targetsAlive reports whether a process the BPF filter traces may still
// run: the kernel side adds followed children itself, before the agent
// has read their fork.
func (t *Tracer) targetsAlive() bool {
	var (
		pid uint32
		v   uint8
	)
	it := t.objs.Targets.Iterate()
	for it.Next(&pid, &v) {
		if !exited(int(pid)) {
			return true
		}
	}
	return it.Err() != nil
}

// exited reports whether every thread of process pid is gone (its pidfd
// is readable then, also while it is an unreaped zombie).
func exited(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0
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
