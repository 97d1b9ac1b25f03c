//go:build amd64 || arm64

package fdtrace

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event/fdevent"
)

func specs(t *testing.T) map[string]*ebpf.CollectionSpec {
	t.Helper()
	// Both committed objects, not only the one this architecture embeds.
	out := map[string]*ebpf.CollectionSpec{}
	for _, name := range []string{"fdtrack_x86_bpfel.o", "fdtrack_arm64_bpfel.o"} {
		s, err := ebpf.LoadCollectionSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s
	}
	return out
}

// TestEventABI checks decode against struct fd_event as the compiler laid
// it out, read back from the BTF of the committed object.
func TestEventABI(t *testing.T) {
	for obj, spec := range specs(t) {
		t.Logf("%s", obj)
		var st *btf.Struct
		if err := spec.Types.TypeByName("fd_event", &st); err != nil {
			t.Fatalf("fd_event not in BTF: %v", err)
		}
		if st.Size != eventSize {
			t.Fatalf("sizeof(struct fd_event) = %d, Go decodes %d", st.Size, eventSize)
		}
		want := map[string]uint32{
			"ts_ns": 0, "size": 8, "flags": 16, "extra": 24, "tgid": 32, "tid": 36, "fd": 40, "fd2": 44,
			"aux": 48, "call": 52, "type": 54, "trunc": 55, "comm": 56, "path": 72,
			"stack": 328,
		}
		for _, m := range st.Members {
			off, ok := want[m.Name]
			if !ok {
				t.Errorf("member %s is not decoded by Go", m.Name)
				continue
			}
			if got := m.Offset.Bytes(); got != off {
				t.Errorf("member %s at %d, Go reads it at %d", m.Name, got, off)
			}
			delete(want, m.Name)
		}
		for name := range want {
			t.Errorf("Go decodes %s, which the C struct lacks", name)
		}
	}
}

func enumValues(t *testing.T, spec *ebpf.CollectionSpec, name string) map[string]uint64 {
	t.Helper()
	var en *btf.Enum
	if err := spec.Types.TypeByName(name, &en); err != nil {
		t.Fatalf("%s not in BTF: %v", name, err)
	}
	out := map[string]uint64{}
	for _, v := range en.Values {
		out[v.Name] = v.Value
	}
	return out
}

// TestCallAndTypeNumbers checks the Go constants against enum fd_call and
// enum fd_type.
func TestCallAndTypeNumbers(t *testing.T) {
	for obj, spec := range specs(t) {
		t.Logf("%s", obj)
		calls := enumValues(t, spec, "fd_call")
		if uint64(fdevent.CallMax) != calls["FD_CALL_MAX"] {
			t.Errorf("FD_CALL_MAX = %d, Go has %d calls", calls["FD_CALL_MAX"], fdevent.CallMax)
		}
		for c := fdevent.CallOpen; c < fdevent.CallMax; c++ {
			name := "FD_CALL_" + upper(c.String())
			if v, ok := calls[name]; !ok || v != uint64(c) {
				t.Errorf("%s = %d (present %v), Go has %d", name, v, ok, c)
			}
		}
		types := enumValues(t, spec, "fd_type")
		for name, v := range map[string]fdevent.Type{"FD_EV_OPEN": fdevent.TypeOpen, "FD_EV_CLOSE": fdevent.TypeClose,
			"FD_EV_CLOSE_RANGE": fdevent.TypeCloseRange, "FD_EV_DMABUF_ALLOC": fdevent.TypeDmabufAlloc, "FD_EV_ION_ALLOC": fdevent.TypeIONAlloc,
			"FD_EV_ION_LEGACY_ALLOC": fdevent.TypeIONLegacyAlloc, "FD_EV_ION_FREE": fdevent.TypeIONFree} {
			if types[name] != uint64(v) {
				t.Errorf("%s = %d, Go has %d", name, types[name], v)
			}
		}
		if len(types) != 7 {
			t.Errorf("enum fd_type has %d values, Go knows 7", len(types))
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestSyscallTable checks the per-architecture table: every call the
// kernel side knows is reachable on this architecture except the ones it
// lacks, and no call is listed twice.
func TestSyscallTable(t *testing.T) {
	seen := map[fdevent.Call]uint32{}
	for nr, c := range syscallCalls {
		if prev, dup := seen[c]; dup {
			t.Errorf("%v is syscall %d and %d", c, prev, nr)
		}
		seen[c] = nr
		if nr >= 512 {
			t.Errorf("syscall %d (%v) does not fit the 512-entry calls map", nr, c)
		}
	}
	missing := map[string]bool{}
	for c := fdevent.CallOpen; c < fdevent.CallMax; c++ {
		if _, ok := seen[c]; !ok {
			missing[c.String()] = true
		}
	}
	want := map[string]bool{}
	if len(syscallCalls) < 25 { // arm64's generic table
		for _, n := range []string{"open", "creat", "pipe", "dup2", "eventfd", "signalfd", "epoll_create", "inotify_init"} {
			want[n] = true
		}
	}
	for n := range missing {
		if !want[n] {
			t.Errorf("%s has no syscall number", n)
		}
	}
}

// TestCallsFor checks which calls each track selection asks the kernel
// for.
func TestCallsFor(t *testing.T) {
	onlyFD := callsFor(config.TrackFD)
	onlyDmabuf := callsFor(config.TrackDmabuf)
	if onlyFD[fdevent.CallIoctl] || !onlyFD[fdevent.CallOpenat] || !onlyFD[fdevent.CallClose] || !onlyFD[fdevent.CallInotifyInit1] {
		t.Errorf("fd: %v", onlyFD)
	}
	if !onlyDmabuf[fdevent.CallIoctl] || !onlyDmabuf[fdevent.CallDup2] || !onlyDmabuf[fdevent.CallCloseRange] || onlyDmabuf[fdevent.CallOpenat] || onlyDmabuf[fdevent.CallSocket] {
		t.Errorf("dmabuf: %v", onlyDmabuf)
	}
	if c := callsFor(config.TrackMalloc | config.TrackMmap); len(c) != 0 {
		t.Errorf("malloc,mmap asks for %v", c)
	}
}
