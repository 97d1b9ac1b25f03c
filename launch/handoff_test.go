package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/tracer"
)

// procLinks lists the BPF links process pid holds, by its fdinfo: the
// link ID of each descriptor whose link_type is one of types.
func procLinks(t *testing.T, pid int, types ...string) []int {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("the descriptors of process %d: %v", pid, err)
	}
	var ids []int
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		var typ string
		id := -1
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "link_type":
				typ = strings.TrimSpace(v)
			case "link_id":
				id, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		for _, want := range types {
			if typ == want && id >= 0 {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// linkExists reports whether the kernel still has the link with this ID.
func linkExists(id int) bool {
	l, err := link.NewFromID(link.ID(id))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	l.Close()
	return true
}

// uprobeLinks are the link types a run's probes use (session links are
// uprobe_multi links to the kernel; classic ones perf_event links).
var uprobeLinks = []string{"uprobe_multi", "perf"}

// TestHandOffToWatchdog: at the end of a -- run whose program has exited,
// memtrace holds no uprobe link any more (its closes waited for no grace
// period) and its watchdog holds every one of them; once memtrace is gone
// (its end of the socket closed, as at its exit), the watchdog closes
// them: within a bound they are gone from its descriptors and from the
// kernel, and the watchdog exits after its resume sweeps.
func TestHandOffToWatchdog(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the watchdog's resume sweeps: make test runs it")
	}
	bpftest.Require(t)
	bin := cProgram(t, `#include <stdlib.h>
int main(void) {
	void *volatile p = malloc(4242);
	free(p);
	return 3;
}
`)
	launchBPF(t, []string{bin}, 3)
	wd := watchdogSock
	if wd == nil {
		t.Fatal("no watchdog")
	}
	if own := procLinks(t, os.Getpid(), uprobeLinks...); len(own) > 0 {
		t.Errorf("memtrace still holds uprobe links %v after Run", own)
	}
	// The links are in the watchdog's socket until it reads them.
	var held []int
	for end := time.Now().Add(5 * time.Second); len(held) == 0; time.Sleep(10 * time.Millisecond) {
		if held = procLinks(t, wd.pid, uprobeLinks...); len(held) == 0 && time.Now().After(end) {
			t.Fatalf("the watchdog (pid %d) holds no uprobe link 5 s after Run: nothing was handed over", wd.pid)
		}
	}
	for _, id := range held {
		if !linkExists(id) {
			t.Errorf("link %d the watchdog holds is not in the kernel", id)
		}
	}
	// memtrace's exit, as far as the watchdog can tell.
	gone := time.Now()
	wd.sock.Close()
	watchdogSock = nil
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left []int
		for _, id := range held {
			if linkExists(id) {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			t.Logf("%d links released %v after memtrace's end", len(held), time.Since(gone).Round(time.Millisecond))
			break
		}
		if time.Now().After(end) {
			t.Fatalf("links %v still in the kernel 5 s after memtrace's end", left)
		}
	}
	// Reaped by the goroutine startWatchdog left; gone means ESRCH.
	for end := time.Now().Add(10 * time.Second); syscall.Kill(wd.pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the watchdog (pid %d) still runs 10 s after memtrace's end", wd.pid)
		}
	}
}

// TestNoHandOffInAttachMode: -p mode never hands its probes over, also
// with --follow (which starts a watchdog where the kernel cannot release
// holds itself): when Run returns, the links memtrace had are gone from
// the kernel, released by memtrace itself.
func TestNoHandOffInAttachMode(t *testing.T) {
	bpftest.Require(t)
	bin := cProgram(t, `#include <stdlib.h>
#include <unistd.h>
int main(void) {
	char ch;
	if (read(0, &ch, 1) != 1)
		return 1;
	void *volatile p = malloc(777);
	free(p);
	return 0;
}
`)
	// A launch-mode test before this one leaves its watchdog here (the
	// variable keeps it for memtrace's whole life): it is not this run's.
	if watchdogSock != nil {
		watchdogSock.sock.Close()
		watchdogSock = nil
	}
	_, finish := attachBPF(t, Options{Follow: true}, bin)
	wd := watchdogSock
	if (wd == nil) != tracer.KernelRelease() {
		t.Fatalf("watchdog %v with --follow where the kernel releases holds itself: %v", wd != nil, tracer.KernelRelease())
	}
	ours := procLinks(t, os.Getpid(), uprobeLinks...)
	if len(ours) == 0 {
		t.Fatal("memtrace holds no uprobe link while attached")
	}
	finish()
	if wd != nil {
		if held := procLinks(t, wd.pid, uprobeLinks...); len(held) > 0 {
			t.Errorf("in -p mode the watchdog holds links %v", held)
		}
	}
	// Released by memtrace itself before Run returned: none in flight.
	for _, id := range ours {
		if linkExists(id) {
			t.Errorf("link %d is still in the kernel after Run: in -p mode memtrace releases its probes itself", id)
		}
	}
	if own := procLinks(t, os.Getpid(), uprobeLinks...); len(own) > 0 {
		t.Errorf("memtrace still holds uprobe links %v after Run", own)
	}
	if wd != nil {
		wd.sock.Close()
	}
	watchdogSock = nil
}
