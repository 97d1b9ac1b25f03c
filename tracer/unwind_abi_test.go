//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/unwind"
)

// btfStruct checks a struct's size and member offsets in the committed
// object's BTF against what the Go side writes or reads.
func btfStruct(t *testing.T, name string, size uint32, want map[string]uint32) {
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
		t.Errorf("sizeof %s = %d, Go uses %d", name, st.Size, size)
	}
	seen := map[string]bool{}
	for _, m := range st.Members {
		off, ok := want[m.Name]
		if !ok || m.Offset.Bytes() != off {
			t.Errorf("%s.%s at %d, Go uses %d (known %v)", name, m.Name, m.Offset.Bytes(), off, ok)
		}
		seen[m.Name] = true
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("Go uses %s.%s, which the C struct lacks", name, n)
		}
	}
}

// TestUnwindABI checks the DWARF walk's map layouts: the rows and
// extended rules the unwind package encodes, the table placement, the
// mapping array, the file fallback and the stop reasons.
func TestUnwindABI(t *testing.T) {
	btfStruct(t, "mt_urow", unwind.RowSize, map[string]uint32{
		"pc": unwind.RowOffPC, "cfa": unwind.RowOffCFA, "info": unwind.RowOffInfo, "reg": unwind.RowOffReg})
	btfStruct(t, "mt_uext", unwind.ExtSize, map[string]uint32{
		"cfa_off": unwind.ExtOffCFA, "fp_off": unwind.ExtOffFP, "ra_off": unwind.ExtOffRA,
		"info": unwind.ExtOffInfo, "plt": unwind.ExtOffPLT, "zero": unwind.ExtOffPLT + 1})
	btfStruct(t, "mt_utable", uTableSize, map[string]uint32{
		"row_first": 0, "row_count": 4, "page_first": 8, "page_count": 12, "ext_first": 16, "ext_count": 20})
	btfStruct(t, "mt_umap", uMapSize, map[string]uint32{"start": 0, "end": 8, "base": 16, "t": 24})
	btfStruct(t, "mt_umaps", uMapsSize, map[string]uint32{"n": 0, "gen": 4, "m": 8})
	btfStruct(t, "mt_ufile_key", uFileKeySize, map[string]uint32{"dev": 0, "ino": 8})
	btfStruct(t, "mt_ufile", uFileSize, map[string]uint32{"t": 0, "seg_off": 24, "seg_end": 32, "delta": 40})

	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var en *btf.Enum
	if err := spec.Types.TypeByName("mt_stop", &en); err != nil {
		t.Fatalf("mt_stop not in BTF: %v", err)
	}
	goStops := map[string]event.StopReason{"MT_STOP_FPWALK": event.StopFPWalk, "MT_STOP_END": event.StopEnd, "MT_STOP_DEPTH": event.StopDepth,
		"MT_STOP_NO_INFO": event.StopNoInfo, "MT_STOP_BAD_READ": event.StopBadRead, "MT_STOP_FP": event.StopFP}
	if len(en.Values) != len(goStops) {
		t.Errorf("C has %d stop reasons, Go %d", len(en.Values), len(goStops))
	}
	for _, v := range en.Values {
		if g, ok := goStops[v.Name]; !ok || uint64(g) != v.Value {
			t.Errorf("%s = %d in C, Go has %d (known %v)", v.Name, v.Value, g, ok)
		}
	}
}

// TestStackDecodeReason: the decoder reads nframes and the stop reason.
func TestStackDecodeReason(t *testing.T) {
	b := make([]byte, stackSize)
	le := binary.LittleEndian
	b[0], b[1] = byte(recStack), byte(event.StopNoInfo)
	le.PutUint16(b[2:], 2)
	le.PutUint32(b[4:], 42)
	le.PutUint64(b[16:], 0xabc)
	le.PutUint64(b[24:], 0x1111)
	le.PutUint64(b[24+frameSize:], 0x2222)
	var s event.Stack
	if err := decodeStack(&s, b); err != nil {
		t.Fatal(err)
	}
	if s.ID != 0xabc || s.TGID != 42 || len(s.Frames) != 2 || s.Frames[1].Addr != 0x2222 || s.Stop != event.StopNoInfo {
		t.Fatalf("decoded %+v", s)
	}
	for r, want := range map[event.StopReason]string{event.StopEnd: "", event.StopFPWalk: "", event.StopDepth: "depth", event.StopNoInfo: "no-unwind-info",
		event.StopBadRead: "bad-read", event.StopFP: "fp"} {
		if got := r.Truncation(); got != want {
			t.Errorf("%d.Truncation() = %q, want %q", r, got, want)
		}
	}
}
