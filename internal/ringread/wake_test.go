package ringread

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// TestWakeEndsWait: on a real ring buffer map, Wake ends a pending wait
// long before its timeout, the wait after it blocks again for its whole
// timeout, and Close still ends a wait with ErrClosed.
func TestWakeEndsWait(t *testing.T) {
	bpftest.Require(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		t.Fatalf("create a ring buffer map: %v", err)
	}
	defer m.Close()
	r, err := New(m.FD(), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := func(wait time.Duration) (time.Duration, error) {
		start := time.Now()
		err := r.Read(wait, func([]byte) { t.Error("a record in an empty ring") })
		return time.Since(start), err
	}
	done := make(chan error, 1)
	var took time.Duration
	go func() {
		var err error
		took, err = read(10 * time.Second)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Read after Wake: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not end a 10 s wait in 5 s")
	}
	if took >= 5*time.Second {
		t.Fatalf("Read took %v after a Wake at 50 ms", took)
	}
	if d, err := read(200 * time.Millisecond); err != nil || d < 150*time.Millisecond {
		t.Errorf("the wait after a Wake: %v, %v; want the whole 200 ms (rearmed)", d, err)
	}
	go func() {
		_, err := read(10 * time.Second)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ringbuf.ErrClosed) {
			t.Errorf("Read after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a wait in 5 s")
	}
	r.Wake() // after Close: nothing to write to, and no panic
}
