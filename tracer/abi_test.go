//go:build amd64 || arm64

package tracer

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/logfmt"
)

// members checks a struct's size and member offsets against the Go
// decoder's.
func members(t *testing.T, name string, size uint32, want map[string]uint32) {
	t.Helper()
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName(name, &st); err != nil {
		t.Fatalf("%s not in BTF: %v", name, err)
	}
	if st.Size != size {
		t.Fatalf("sizeof(struct %s) = %d, Go decodes %d", name, st.Size, size)
	}
	for _, m := range st.Members {
		off, ok := want[m.Name]
		if !ok {
			t.Errorf("member %s.%s is not known to Go", name, m.Name)
			continue
		}
		if got := m.Offset.Bytes(); got != off {
			t.Errorf("member %s.%s at %d, Go reads it at %d", name, m.Name, got, off)
		}
		delete(want, m.Name)
	}
	for m := range want {
		t.Errorf("Go decodes %s.%s, which the C struct lacks", name, m)
	}
}

// TestEventABI checks the Go decoder against struct mt_slot, mt_slot_ext
// and mt_ctl as the compiler laid them out, read back from the BTF of the
// committed object.
func TestEventABI(t *testing.T) {
	members(t, "mt_slot", slotSize, map[string]uint32{
		"ts_ns": 0, "ptr": 8, "size": 16, "kind": 24, "op": 25, "flags": 26, "word": 28,
	})
	members(t, "mt_slot_ext", slotSize, map[string]uint32{
		"stack": 0, "old_ptr": 8, "old_size": 16, "pad": 24, "word": 28,
	})
	// ring.go reads the read position at 64: the second mt_ctl.
	members(t, "mt_ctl", 64, map[string]uint32{"pos": 0, "pad": 8})
}

// TestSlotDecode checks the decoding of an event slot, its extension and a
// thread slot.
func TestSlotDecode(t *testing.T) {
	s := make([]byte, slotSize)
	s[0], s[8], s[16], s[24], s[25], s[26] = 5, 0x40, 64, KindAlloc|kindExt, 1, 2
	s[28], s[29], s[30], s[31] = 11, 0, 0xc0, 0x00 // tid 11, lap 3
	ext := make([]byte, slotSize)
	ext[0], ext[8], ext[16] = 7, 8, 9
	var e Event
	tid := e.decode(s, ext)
	if tid != 11 || e.TID != 11 || e.TS != 5 || e.Ptr != 0x40 || e.Size != 64 || e.Kind != KindAlloc ||
		e.Op != 1 || e.Flags != 2 || e.Stack != 7 || e.OldPtr != 8 || e.OldSize != 9 {
		t.Fatalf("decoded %+v tid %d", e, tid)
	}
	if e.decode(s, nil); e.Stack != 0 || e.OldPtr != 0 {
		t.Fatalf("a slot without extension kept %+v", e)
	}
	th := make([]byte, slotSize)
	th[0] = 9
	copy(th[8:], "worker")
	if ti := threadOf(th); ti.tgid != 9 || string(ti.comm[:6]) != "worker" || ti.comm[6] != 0 {
		t.Fatalf("thread slot decoded as %+v", ti)
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
	want := map[string]uint32{"ts_ns": 0, "id": 8, "tgid": 16, "nframes": 20, "frames": 24}
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
	if !(fileSize < stackSize) {
		t.Fatalf("record sizes %d %d overlap", fileSize, stackSize)
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
		"MT_EV_FORK": KindFork, "MT_EV_EXEC": KindExec, "MT_EV_THREAD": KindThread}
	for _, v := range kinds.Values {
		if goKinds[v.Name] != v.Value {
			t.Errorf("%s = %d in C, Go has %d", v.Name, v.Value, goKinds[v.Name])
		}
	}
}
