//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Values of the BPF hold map (bpf/memtrace.bpf.c).
const (
	holdPending = 1 // a forked child that stops at its first instruction
	holdStopped = 2 // stopped by the kernel side, waiting for Resume
	// being resumed: the SIGCONT comes next, then the entry is deleted
	holdResuming = 3
)

// The hold map's keys (MT_HOLD_KEY in bpf/memtrace.h): every hold of a
// process has a key of its own, so that releasing one cannot forget
// another.
const (
	holdPIDMask   = 1<<22 - 1
	holdKindShift = 22
	holdFork      = 1
	holdExec      = 2
	holdDL        = 3
	holdSeqShift  = 24
)

// holdKey is MT_HOLD_KEY.
func holdKey(pid int, kind, seq uint32) uint32 {
	return uint32(pid)&holdPIDMask | kind<<holdKindShift | (seq&0xff)<<holdSeqShift
}

// Resume lets a process the kernel side held (FlagHeld) go on, and forgets
// that hold, key (the event's Size), so that no release sweep resumes it
// a second time.
func (t *Tracer) Resume(pid int, key uint32) error {
	if key&holdPIDMask != uint32(pid)&holdPIDMask {
		return syscall.Kill(pid, syscall.SIGCONT)
	}
	return letGo(t.objs.Hold, pid, key)
}

// resumeHook, when set (tests only), runs between a hold's marking and
// its SIGCONT: a test kills memtrace there.
var resumeHook func(pid int)

// letGo resumes one hold of pid: marked HOLD_RESUMING, SIGCONT, deleted.
// The mark goes first: a process not yet at its stop then does not stop
// (a pending fork hold) or continues itself after its SIGSTOP (hold_self),
// and a memtrace that dies before the SIGCONT or the delete leaves an entry
// that the release at its exit (the kernel's or the watchdog's) resumes.
// Deleting the key first, as before, left the process stopped for good
// when memtrace died between the delete and the SIGCONT; a SIGCONT first
// could come before a stop still on its way and be lost.
func letGo(m *ebpf.Map, pid int, key uint32) error {
	marked := m.Update(key, uint8(holdResuming), ebpf.UpdateExist) == nil
	if resumeHook != nil {
		resumeHook(pid)
	}
	err := syscall.Kill(pid, syscall.SIGCONT)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		// Not allowed to signal it (another user's process, memtrace
		// without CAP_KILL): the hold stays, marked, so that the
		// release at memtrace's exit, the kernel's, which needs no
		// right, still resumes it. Never a stop that outlives memtrace.
		return fmt.Errorf("resume process %d: %w (memtrace needs CAP_KILL to resume another user's process)", pid, err)
	}
	if marked {
		_ = m.Delete(key)
	}
	return err
}

// HoldFD is the descriptor of the map of held processes. memtrace hands a
// copy to its watchdog process where the kernel cannot release the holds
// itself (KernelRelease).
func (t *Tracer) HoldFD() int { return t.objs.Hold.FD() }

// KernelRelease reports whether the kernel side lets every held process
// go when memtrace exits, however it exits (SIGKILL included): its exit
// program sends the SIGCONTs (bpf_send_signal_task, Linux 6.13+; in a PID
// namespace of memtrace's own, bpf_task_from_vpid too). Without it only a
// watchdog process can.
func KernelRelease() bool {
	if watchdogOnly() {
		return false
	}
	ks, err := kernelBTF.Kernel()
	if err != nil {
		return false
	}
	kfuncs := []string{"bpf_send_signal_task", "bpf_task_from_pid", "bpf_task_release"}
	// In a PID namespace of its own the holds are the namespace's pids,
	// found from memtrace's exit by vpid (bpf/mt_proc.h, release_one).
	if ns, err := procfs.PIDNamespace(); err != nil || !ns.Initial() {
		kfuncs = append(kfuncs, "bpf_task_from_vpid")
	}
	for _, name := range kfuncs {
		var fn *btf.Func
		if ks.TypeByName(name, &fn) != nil {
			return false
		}
	}
	return true
}

// watchdogOnly is the test hook MEMTRACE_TEST_WATCHDOG=1: the kernel side
// does not release at memtrace's exit, so that tests and benchmarks reach
// and measure the watchdog where the kernel could.
func watchdogOnly() bool { return os.Getenv("MEMTRACE_TEST_WATCHDOG") == "1" }

// ResumeHeld resumes every process the hold map at fd says is stopped and
// forgets every hold, pending ones included (a forked child that has not
// stopped yet then never does): the release sweep of memtrace's end and of
// its watchdog.
func ResumeHeld(fd int) (int, error) {
	m, err := ebpf.NewMapFromFD(fd)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return resumeAll(m)
}

func resumeAll(m *ebpf.Map) (int, error) {
	return sweepHolds(m, func(uint32) bool { return true }, true)
}

// sweepHolds resumes the processes of the holds that match (unless resume
// is false: their process is gone) and deletes those holds; it returns how
// many were stopped or being resumed. The map is read whole first:
// deleting while iterating a hash map can skip entries.
func sweepHolds(m *ebpf.Map, match func(key uint32) bool, resume bool) (int, error) {
	type hold struct {
		key   uint32
		state uint8
	}
	var (
		all   []hold
		key   uint32
		state uint8
	)
	it := m.Iterate()
	for it.Next(&key, &state) {
		if match(key) {
			all = append(all, hold{key, state})
		}
	}
	n := 0
	for _, h := range all {
		if !resume {
			_ = m.Delete(h.key)
			continue
		}
		if h.state != holdPending {
			n++
		}
		// As Resume. A pending hold is sent its SIGCONT too: the
		// state read above may be older than the child's stop, and a
		// SIGCONT to a running process does nothing.
		_ = letGo(m, int(h.key&holdPIDMask), h.key)
	}
	return n, it.Err()
}

// Release lets every process go that the kernel side holds or would hold:
// no hold is made after it (the programs read released), the dynamic
// linkers' dlopen hooks are removed, and every held process is resumed.
// memtrace's end runs it on every way out (Detach, Close); a way out that
// skips it (SIGKILL, a panic) is covered by the kernel side's own release
// at memtrace's exit (KernelRelease) or by the watchdog.
func (t *Tracer) Release() {
	first := false
	t.releaseOnce.Do(func() {
		first = true
		if t.objs.Released != nil {
			_ = t.objs.Released.Set(uint32(1))
		}
	})
	_, _ = resumeAll(t.objs.Hold)
	// The hooks go after the resume: closing one waits for the kernel
	// (the hooks of every process share ld.so's one uprobe, so their
	// closes queue one behind another: seconds for a --follow run's
	// children), and with released set a hook holds nothing. Where a
	// watchdog takes links (-- mode), it closes them after memtrace is
	// gone: a hook left a moment longer costs a target one trap per
	// dlopen.
	if first && t.unw != nil {
		t.mu.Lock()
		give := t.give
		t.mu.Unlock()
		t.unw.closeLoaders(give)
	}
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
	// A process killed while held leaves its holds behind; its pid may
	// be reused, and a later sweep must not resume a stranger.
	// Resumed unless it is gone: a SIGCONT must not reach a stranger.
	_, _ = sweepHolds(t.objs.Hold, func(key uint32) bool { return key&holdPIDMask == uint32(pid)&holdPIDMask }, !exited(pid))
	var hook link.Link
	if t.unw != nil {
		hook = t.unw.forget(pid)
	}
	t.forgetSamples(pid)
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
	if hook != nil {
		ls = append(ls, hook)
	}
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

// forgetSamples deletes an exited process's live samples from the sampled
// map (--sample), which would otherwise fill it, and match the frees of a
// later process given the same pid. Their filter counters stay raised:
// that costs a later free at those addresses a lookup, never a missed
// free.
func (t *Tracer) forgetSamples(pid int) {
	if t.opts.SampleRate == 0 || t.objs.Sampled == nil {
		return
	}
	var k MemtraceMtSampleKey
	var v uint8
	var gone []MemtraceMtSampleKey
	it := t.objs.Sampled.Iterate()
	for it.Next(&k, &v) {
		if k.Tgid == uint32(pid) {
			gone = append(gone, k)
		}
	}
	for i := range gone {
		_ = t.objs.Sampled.Delete(&gone[i])
	}
	if t.objs.SampleCounts != nil {
		_ = t.objs.SampleCounts.Delete(uint32(pid))
	}
}
