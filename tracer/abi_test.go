//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/logfmt"
)

// TestEventABI checks the Go decoder against struct mt_event as the
// compiler laid it out, read back from the BTF of the committed object.
func TestEventABI(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName("mt_event", &st); err != nil {
		t.Fatalf("mt_event not in BTF: %v", err)
	}
	if st.Size != eventSize {
		t.Fatalf("sizeof(struct mt_event) = %d, Go decodes %d", st.Size, eventSize)
	}
	want := map[string]uint32{
		"ts_ns": 0, "ptr": 8, "size": 16, "tid": 24, "kind": 28, "op": 29, "flags": 30,
		"stack": 32, "old_ptr": 40, "old_size": 48,
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

// TestThreadABI checks struct mt_thread and mt_event_packed, and decodes
// a packed event the way the BPF side packs one.
func TestThreadABI(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, size uint32, want map[string]uint32) {
		var st *btf.Struct
		if err := spec.Types.TypeByName(name, &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != size {
			t.Fatalf("sizeof %s %d, Go decodes %d", name, st.Size, size)
		}
		for _, m := range st.Members {
			if off, ok := want[m.Name]; !ok || m.Offset.Bytes() != off {
				t.Errorf("%s.%s at %d, Go reads %d (known %v)", name, m.Name, m.Offset.Bytes(), off, ok)
			}
		}
	}
	check("mt_thread", threadSize, map[string]uint32{"tgid": 0, "tid": 4, "comm": 8, "pad": 24})
	check("mt_event_packed", packedSize, map[string]uint32{"ts_ns": 0, "ptr_op": 8, "size_tid": 16})

	b := make([]byte, threadSize)
	b[0], b[4] = 9, 11
	copy(b[8:], "worker")
	tid, ti, err := decodeThread(b)
	if err != nil || tid != 11 || ti.tgid != 9 || string(ti.comm[:6]) != "worker" {
		t.Fatalf("decoded tid %d %+v %v", tid, ti, err)
	}

	// As send_packed packs: ptr | op << 48 | kind << 56 | flags << 59,
	// size | tid << 42.
	const ptr, size, tidv = 0x7ffd_1234_5678, 1<<41 + 3, 1<<22 - 1
	le := binary.LittleEndian
	p := make([]byte, packedSize)
	le.PutUint64(p[0:], 77)
	le.PutUint64(p[8:], ptr|uint64(logfmt.OpMmap)<<48|uint64(KindAlloc)<<56|uint64(FlagFile|FlagHeld)<<59)
	le.PutUint64(p[16:], size|uint64(tidv)<<42)
	e := Event{Stack: 5, OldPtr: 6}
	if err := e.decode(p); err != nil || e.TS != 77 || e.Ptr != ptr || e.Op != uint8(logfmt.OpMmap) ||
		e.Kind != KindAlloc || e.Flags != FlagFile|FlagHeld || e.Size != size || e.TID != tidv ||
		e.Stack != 0 || e.OldPtr != 0 {
		t.Fatalf("packed event decoded as %+v %v", e, err)
	}
	if err := e.decode(p[:20]); err == nil {
		t.Fatalf("a 20-byte record decoded")
	}
}

// TestStackABI checks struct mt_stack and struct mt_frame.
func TestStackABI(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var st, fr *btf.Struct
	if err := spec.Types.TypeByName("mt_stack", &st); err != nil {
		t.Fatal(err)
	}
	if err := spec.Types.TypeByName("mt_frame", &fr); err != nil {
		t.Fatal(err)
	}
	if st.Size != stackSize || fr.Size != frameSize {
		t.Fatalf("sizeof mt_stack %d mt_frame %d; Go decodes %d and %d", st.Size, fr.Size, stackSize, frameSize)
	}
	want := map[string]uint32{"ts_ns": 0, "id": 8, "tgid": 16, "nframes": 20, "reason": 22, "frames": 24}
	for _, m := range st.Members {
		if off, ok := want[m.Name]; !ok || m.Offset.Bytes() != off {
			t.Errorf("mt_stack.%s at %d, Go reads %d (known %v)", m.Name, m.Offset.Bytes(), off, ok)
		}
	}
	wantF := map[string]uint32{"addr": 0, "fileoff": 8, "ino": 16}
	for _, m := range fr.Members {
		if off, ok := wantF[m.Name]; !ok || m.Offset.Bytes() != off {
			t.Errorf("mt_frame.%s at %d, Go reads %d (known %v)", m.Name, m.Offset.Bytes(), off, ok)
		}
	}
}

// TestFileABI checks struct mt_file.
func TestFileABI(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName("mt_file", &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != fileSize {
		t.Fatalf("sizeof mt_file %d, Go decodes %d", st.Size, fileSize)
	}
	// The sizes must stay apart: Read tells the records by size.
	if !(packedSize < threadSize && threadSize < eventSize && eventSize < fileSize && fileSize < stackSize) {
		t.Fatalf("record sizes %d %d %d %d %d overlap", packedSize, threadSize, eventSize, fileSize, stackSize)
	}
	b := make([]byte, fileSize)
	b[0] = 7
	b[8] = 3
	copy(b[16:], "libx.so")
	copy(b[16+partLen:], "lib")
	copy(b[16+2*partLen:], "usr")
	var f File
	if err := f.decode(b); err != nil || f.Path != "/usr/lib/libx.so" || f.Ino != 7 {
		t.Fatalf("decoded %+v %v", f, err)
	}
}

// TestOpNumbers checks that the C op numbers are logfmt's.
func TestOpNumbers(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var en *btf.Enum
	if err := spec.Types.TypeByName("mt_op", &en); err != nil {
		t.Fatalf("mt_op not in BTF: %v", err)
	}
	names := map[string]logfmt.Op{
		"MT_OP_MALLOC": logfmt.OpMalloc, "MT_OP_CALLOC": logfmt.OpCalloc, "MT_OP_REALLOC": logfmt.OpRealloc,
		"MT_OP_REALLOCARRAY": logfmt.OpReallocarray, "MT_OP_FREE": logfmt.OpFree, "MT_OP_NEW": logfmt.OpNew,
		"MT_OP_NEW_ARR": logfmt.OpNewArr, "MT_OP_DELETE": logfmt.OpDelete, "MT_OP_DELETE_ARR": logfmt.OpDeleteArr,
		"MT_OP_STRDUP": logfmt.OpStrdup, "MT_OP_STRNDUP": logfmt.OpStrndup, "MT_OP_MMAP": logfmt.OpMmap,
		"MT_OP_MUNMAP": logfmt.OpMunmap, "MT_OP_MREMAP": logfmt.OpMremap, "MT_OP_POSIX_MEMALIGN": logfmt.OpPosixMemalign,
		"MT_OP_ALIGNED_ALLOC": logfmt.OpAlignedAlloc, "MT_OP_MEMALIGN": logfmt.OpMemalign, "MT_OP_VALLOC": logfmt.OpValloc,
		"MT_OP_PVALLOC": logfmt.OpPvalloc,
	}
	for _, v := range en.Values {
		op, ok := names[v.Name]
		if !ok {
			t.Errorf("%s has no logfmt op", v.Name)
			continue
		}
		if uint64(op) != v.Value {
			t.Errorf("%s = %d in C, logfmt says %d", v.Name, v.Value, op)
		}
	}
	if len(en.Values) != len(names) {
		t.Errorf("C has %d ops, Go %d", len(en.Values), len(names))
	}
}

// TestSigNumbers checks the Go signature constants against enum mt_sig.
func TestSigNumbers(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var en *btf.Enum
	if err := spec.Types.TypeByName("mt_sig", &en); err != nil {
		t.Fatalf("mt_sig not in BTF: %v", err)
	}
	goSigs := map[string]int{
		"MT_SIG_SIZE0": sigSize0, "MT_SIG_CALLOC": sigCalloc, "MT_SIG_REALLOC": sigRealloc,
		"MT_SIG_REALLOCARRAY": sigReallocarray, "MT_SIG_ALIGN_SIZE": sigAlignSize,
		"MT_SIG_POSIX_MEMALIGN": sigPosixMemalign, "MT_SIG_STRDUP": sigStrdup, "MT_SIG_MMAP": sigMmap,
		"MT_SIG_MREMAP": sigMremap, "MT_SIG_NEW_ALIGNED": sigNewAligned, "MT_SIG_FREE_CHECKED": sigFreeChecked,
	}
	if len(en.Values) != len(goSigs) {
		t.Errorf("C has %d signatures, Go %d", len(en.Values), len(goSigs))
	}
	for _, v := range en.Values {
		if g, ok := goSigs[v.Name]; !ok || uint64(g) != v.Value {
			t.Errorf("%s = %d in C, Go has %d (known %v)", v.Name, v.Value, g, ok)
		}
	}
	var kinds *btf.Enum
	if err := spec.Types.TypeByName("mt_kind", &kinds); err != nil {
		t.Fatal(err)
	}
	goKinds := map[string]uint64{"MT_EV_ALLOC": KindAlloc, "MT_EV_FREE": KindFree, "MT_EV_REALLOC": KindRealloc, "MT_EV_EXIT": KindExit,
		"MT_EV_FORK": KindFork, "MT_EV_EXEC": KindExec}
	for _, v := range kinds.Values {
		if goKinds[v.Name] != v.Value {
			t.Errorf("%s = %d in C, Go has %d", v.Name, v.Value, goKinds[v.Name])
		}
	}
}
