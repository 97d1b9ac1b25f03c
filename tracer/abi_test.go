//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/ops"
	"github.com/memtrace/memtrace/logfmt"
)

// TestEventABI checks the Go decoder against struct mt_event as the
// compiler laid it out, read back from the BTF of the committed object,
// and decodes one as reserve_full fills it.
func TestEventABI(t *testing.T) {
	btfStruct(t, "mt_event", eventSize, map[string]uint32{
		"type": 0, "kind": 1, "op": 2, "flags": 3, "tid": 4, "ts_ns": 8, "ptr": 16, "size": 24,
		"stack": 32, "old_ptr": 40, "old_size": 48,
	})
	le := binary.LittleEndian
	b := make([]byte, eventSize)
	b[0], b[1], b[2], b[3] = byte(recEvent), event.KindFree, byte(logfmt.OpMunmap), event.FlagCallsite|event.FlagHeld
	le.PutUint32(b[4:], 1<<22-1)
	for i, v := range []uint64{77, 1 << 63, 1<<64 - 1, 9, 10, 11} {
		le.PutUint64(b[8+8*i:], v)
	}
	var e event.Event
	if err := decodeEvent(&e, b); err != nil || e.Kind != event.KindFree || e.Op != uint8(logfmt.OpMunmap) ||
		e.Flags != event.FlagCallsite|event.FlagHeld || e.TID != 1<<22-1 || e.TS != 77 || e.Ptr != 1<<63 ||
		e.Size != 1<<64-1 || e.Stack != 9 || e.OldPtr != 10 || e.OldSize != 11 {
		t.Fatalf("event decoded as %+v %v", e, err)
	}
	if err := decodeEvent(&e, b[:eventSize-1]); err == nil {
		t.Fatal("a short event decoded")
	}
	b[0] = byte(recThread)
	if err := decodeEvent(&e, b); err == nil {
		t.Fatal("a thread record decoded as an event")
	}
}

// TestThreadABI checks struct mt_thread and mt_event_packed's fields, and
// decodes a thread record.
func TestThreadABI(t *testing.T) {
	btfStruct(t, "mt_thread", threadSize, map[string]uint32{"type": 0, "tgid": 4, "tid": 8, "comm": 12})
	btfStruct(t, "mt_event_packed", packedSize, map[string]uint32{"op_ptr": 0, "ts_ns": 8, "size_tid": 16})

	b := make([]byte, threadSize)
	b[0], b[4], b[8] = byte(recThread), 9, 11
	copy(b[12:], "worker")
	tid, ti, err := decodeThread(b)
	if err != nil || tid != 11 || ti.tgid != 9 || string(ti.comm[:6]) != "worker" {
		t.Fatalf("decoded tid %d %+v %v", tid, ti, err)
	}
	if _, _, err := decodeThread(b[:threadSize-1]); err == nil {
		t.Fatal("a short thread record decoded")
	}
}

// TestRecordTypes: enum mt_rec's names and numbers are Go's, none is 0,
// every record struct starts with its type byte (the packed event in
// op_ptr's low byte, which TestPackedMatchesC checks), and each decoder
// takes its own type only.
func TestRecordTypes(t *testing.T) {
	spec, err := LoadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	var en *btf.Enum
	if err := spec.Types.TypeByName("mt_rec", &en); err != nil {
		t.Fatalf("mt_rec not in BTF: %v", err)
	}
	goRecs := map[string]recType{"MT_REC_PACKED": recPacked, "MT_REC_EVENT": recEvent, "MT_REC_THREAD": recThread,
		"MT_REC_STACK": recStack, "MT_REC_FILE": recFile, "MT_REC_REMAP": recRemap}
	if len(en.Values) != len(goRecs) {
		t.Errorf("C has %d record types, Go %d", len(en.Values), len(goRecs))
	}
	for _, v := range en.Values {
		if g, ok := goRecs[v.Name]; !ok || uint64(g) != v.Value || v.Value == 0 {
			t.Errorf("%s = %d in C, Go has %d (known %v); 0 is no type", v.Name, v.Value, g, ok)
		}
	}
	for _, name := range []string{"mt_event", "mt_thread", "mt_stack", "mt_file", "mt_remap"} {
		var st *btf.Struct
		if err := spec.Types.TypeByName(name, &st); err != nil {
			t.Fatal(err)
		}
		if m := st.Members[0]; m.Name != "type" || m.Offset != 0 || m.Type.TypeName() != "__u8" {
			t.Errorf("%s starts with %s (%s) at bit %d, want its __u8 type", name, m.Name, m.Type.TypeName(), m.Offset)
		}
	}

	// Each record at its full size: exactly the decoder of its type
	// takes it.
	sizes := map[recType]int{recPacked: packedSize, recEvent: eventSize, recThread: threadSize,
		recStack: stackSize, recFile: fileSize, recRemap: remapSize}
	for typ, n := range sizes {
		b := make([]byte, n)
		b[0] = byte(typ)
		var e event.Event
		var s event.Stack
		var f event.File
		_, _, errT := decodeThread(b)
		_, errR := decodeRemap(b)
		got := map[recType]error{recEvent: decodeEvent(&e, b), recThread: errT, recStack: decodeStack(&s, b), recFile: decodeFile(&f, b), recRemap: errR}
		got[recPacked] = got[recEvent]
		for dec, err := range got {
			if want := dec == typ || dec == recPacked && typ == recEvent || dec == recEvent && typ == recPacked; (err == nil) != want {
				t.Errorf("record of type %d (%d bytes): the decoder of type %d says %v", typ, n, dec, err)
			}
		}
	}
}

// TestRemapABI checks struct mt_remap and decodes a held request.
func TestRemapABI(t *testing.T) {
	btfStruct(t, "mt_remap", remapSize, map[string]uint32{"type": 0, "held": 1, "tgid": 4, "hold_key": 8})
	b := make([]byte, remapSize)
	b[0], b[1] = byte(recRemap), 1
	binary.LittleEndian.PutUint32(b[4:], 4242)
	key := holdKey(4242, holdDL, 9)
	binary.LittleEndian.PutUint32(b[8:], key)
	r, err := decodeRemap(b)
	if err != nil || r != (remapRequest{pid: 4242, held: true, holdKey: key}) {
		t.Fatalf("remap decoded as %+v %v", r, err)
	}
	b[1] = 0
	if r, err := decodeRemap(b); err != nil || r.held {
		t.Fatalf("an unheld remap decoded as %+v %v", r, err)
	}
}

// TestBacklogABI checks struct mt_backlog, which the backlog drain cuts
// into a thread record and an event.
func TestBacklogABI(t *testing.T) {
	btfStruct(t, "mt_backlog", backlogSize, map[string]uint32{"thread": 0, "ev": backlogEventOff})
	if backlogEventOff < threadSize || backlogEventOff+eventSize != backlogSize {
		t.Errorf("backlog layout: event at %d of %d, thread %d and event %d bytes", backlogEventOff, backlogSize, threadSize, eventSize)
	}
}

// TestHoldKeyMatchesC: the Go side's hold keys (Resume's, the sweeps')
// are the header's MT_HOLD_KEY, and the sweeps take back the pid, at the
// limits of each field; two kinds or sequences of one pid never share a
// key.
func TestHoldKeyMatchesC(t *testing.T) {
	type in struct {
		pid       int
		kind, seq uint32
	}
	cases := []in{{1, holdFork, 0}, {holdPIDMask, holdExec, 0xff}, {4242, holdDL, 0x1a5}, {4242, holdDL, 0xa5}, {77, holdExec, 1}}
	var reqs []string
	for _, c := range cases {
		reqs = append(reqs, fmt.Sprintf("hold %x %x %x", c.pid, c.kind, c.seq))
	}
	seen := map[uint32]in{}
	for i, line := range abiCheck(t, reqs) {
		c := cases[i]
		var key, pid uint32
		if _, err := fmt.Sscanf(line, "%x %x", &key, &pid); err != nil {
			t.Fatalf("abi_check answered %q to %q", line, reqs[i])
		}
		if g := holdKey(c.pid, c.kind, c.seq); g != key {
			t.Errorf("%+v: Go key %#x, C %#x", c, g, key)
		}
		if int(pid) != c.pid || int(key&holdPIDMask) != c.pid {
			t.Errorf("%+v: the sweeps would resume %d (C) / %d (Go)", c, pid, key&holdPIDMask)
		}
		if o, dup := seen[key]; dup && (o.kind != c.kind || o.seq&0xff != c.seq&0xff) {
			t.Errorf("%+v and %+v share key %#x", o, c, key)
		}
		seen[key] = c
	}
}

// TestStackABI checks struct mt_stack and struct mt_frame.
func TestStackABI(t *testing.T) {
	btfStruct(t, "mt_stack", stackSize, map[string]uint32{
		"type": 0, "reason": 1, "nframes": 2, "tgid": 4, "ts_ns": 8, "id": 16, "frames": 24})
	btfStruct(t, "mt_frame", frameSize, map[string]uint32{"addr": 0, "fileoff": 8, "ino": 16})
}

// TestFileABI checks struct mt_file.
func TestFileABI(t *testing.T) {
	btfStruct(t, "mt_file", fileSize, map[string]uint32{"type": 0, "truncated": 1, "nparts": 2, "ino": 8, "parts": 16})
	b := make([]byte, fileSize)
	b[0], b[2], b[8] = byte(recFile), 3, 7
	copy(b[16:], "libx.so")
	copy(b[16+partLen:], "lib")
	copy(b[16+2*partLen:], "usr")
	var f event.File
	if err := decodeFile(&f, b); err != nil || f.Path != "/usr/lib/libx.so" || f.Ino != 7 || f.Truncated {
		t.Fatalf("decoded %+v %v", f, err)
	}
	b[1] = 1
	if err := decodeFile(&f, b); err != nil || !f.Truncated {
		t.Fatalf("a truncated path decoded as %+v %v", f, err)
	}
}

// TestOpNumbers: enum mt_op in both builds' BTF is the table's BPF ops
// (internal/ops), numbered as logfmt, and every op's number, the BPF ones
// or not, fits the attach cookie's op bits.
func TestOpNumbers(t *testing.T) {
	want := map[string]uint64{}
	for _, o := range ops.Ops {
		num := ops.Num(o.Go)
		if o.BPF {
			want["MT_OP_"+o.C] = uint64(num)
		}
		if num >= 1<<ckOpBits || num >= logfmt.NumOps {
			t.Errorf("op %s = %d: past the cookie's %d op bits or logfmt's %d ops", o.Text, num, ckOpBits, logfmt.NumOps)
		}
	}
	for build, load := range map[string]func() (*ebpf.CollectionSpec, error){"memtrace": LoadMemtrace, "compat": LoadMemtraceCompat} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		var en *btf.Enum
		if err := spec.Types.TypeByName("mt_op", &en); err != nil {
			t.Fatalf("%s: mt_op not in BTF: %v", build, err)
		}
		for _, v := range en.Values {
			if num, ok := want[v.Name]; !ok || num != v.Value {
				t.Errorf("%s: %s = %d in C; the table: %d (in it: %v)", build, v.Name, v.Value, num, ok)
			}
		}
		if len(en.Values) != len(want) {
			t.Errorf("%s: C has %d ops, the table's BPF ops are %d", build, len(en.Values), len(want))
		}
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
		"MT_SIG_POSIX_MEMALIGN": sigPosixMemalign, "MT_SIG_STRDUP": sigStrdup, "MT_SIG_MMAP": sigMmap, "MT_SIG_XALLOCX": sigXallocx,
		"MT_SIG_MREMAP": sigMremap, "MT_SIG_NEW_ALIGNED": sigNewAligned, "MT_SIG_FREE_CHECKED": sigFreeChecked,
	}
	if len(en.Values) != len(goSigs) {
		t.Errorf("C has %d signatures, Go %d", len(en.Values), len(goSigs))
	}
	for _, v := range en.Values {
		if g, ok := goSigs[v.Name]; !ok || uint64(g) != v.Value {
			t.Errorf("%s = %d in C, Go has %d (known %v)", v.Name, v.Value, g, ok)
		}
		if v.Value >= 1<<ckSigBits {
			t.Errorf("%s = %d does not fit the cookie's %d signature bits", v.Name, v.Value, ckSigBits)
		}
	}
	var kinds *btf.Enum
	if err := spec.Types.TypeByName("mt_kind", &kinds); err != nil {
		t.Fatal(err)
	}
	goKinds := map[string]uint64{"MT_EV_ALLOC": event.KindAlloc, "MT_EV_FREE": event.KindFree, "MT_EV_EXIT": event.KindExit,
		"MT_EV_FORK": event.KindFork, "MT_EV_EXEC": event.KindExec}
	for _, v := range kinds.Values {
		if v.Name == "MT_EV_REALLOC" {
			// The program's own state: it sends a realloc as a free and
			// an alloc, and the agent reads no such kind.
			continue
		}
		if goKinds[v.Name] != v.Value {
			t.Errorf("%s = %d in C, Go has %d", v.Name, v.Value, goKinds[v.Name])
		}
		if v.Value >= 1<<pkKindBits {
			t.Errorf("%s = %d does not fit a packed event's %d kind bits", v.Name, v.Value, pkKindBits)
		}
	}
}

// abiCheck answers requests with testdata/abi_check.c: bpf/memtrace.h's
// macros as the BPF programs apply them, compiled for the host.
func abiCheck(t *testing.T, reqs []string) []string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		bpftest.Unavailable(t, "gcc not installed (it compiles bpf/memtrace.h's macros)")
	}
	bin := filepath.Join(t.TempDir(), "abi_check")
	if out, err := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", "../bpf",
		"-o", bin, "testdata/abi_check.c").CombinedOutput(); err != nil {
		t.Fatalf("compile testdata/abi_check.c: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(strings.Join(reqs, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("abi_check: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(reqs) {
		t.Fatalf("abi_check answered %d of %d requests: %q", len(lines), len(reqs), out)
	}
	return lines
}

// TestPackedMatchesC: events packed by the header's MT_PK_* macros, as
// send_packed packs them, decode in Go to the same fields, at the limits
// of every field; and MT_PK_FITS refuses what does not fit.
func TestPackedMatchesC(t *testing.T) {
	type in struct{ op, ptr, size, kind, flags, tid, ts uint64 }
	cases := []struct {
		in   in
		fits bool
	}{
		{in{uint64(logfmt.OpMmap), 0x7ffd_1234_5678, 1<<35 + 3, event.KindAlloc, event.FlagFile | event.FlagHeld, 1<<22 - 1, 77}, true},
		{in{1<<ckOpBits - 1, 1<<ptrBits - 1, 1<<sizeBits - 1, 1<<pkKindBits - 1, 1<<pkFlagsBits - 1, 1<<22 - 1, 1<<64 - 1}, true},
		{in{uint64(logfmt.OpFree), 0x10, 0, event.KindFree, 0, 1, 1}, true},
		{in{uint64(logfmt.OpMalloc), 1 << ptrBits, 8, event.KindAlloc, 0, 1, 1}, false},
		{in{uint64(logfmt.OpMalloc), 0x10, 1 << sizeBits, event.KindAlloc, 0, 1, 1}, false},
		{in{uint64(logfmt.OpMalloc), 0x10, 8, event.KindAlloc, event.FlagCallsite << 2, 1, 1}, false},
	}
	var reqs []string
	for _, c := range cases {
		v := c.in
		reqs = append(reqs, fmt.Sprintf("pack %x %x %x %x %x %x %x", v.op, v.ptr, v.size, v.kind, v.flags, v.tid, v.ts))
	}
	for i, line := range abiCheck(t, reqs) {
		c := cases[i]
		fits, hexRec, ok := strings.Cut(line, " ")
		if !ok || fits != "0" && fits != "1" {
			t.Fatalf("abi_check answered %q to %q", line, reqs[i])
		}
		if (fits == "1") != c.fits {
			t.Errorf("%s: MT_PK_FITS says %s, want %v", reqs[i], fits, c.fits)
		}
		if !c.fits {
			continue
		}
		b, err := hex.DecodeString(hexRec)
		if err != nil || len(b) != packedSize {
			t.Fatalf("abi_check gave %q (%v), want %d bytes", hexRec, err, packedSize)
		}
		if recordType(b) != recPacked {
			t.Errorf("%s: byte 0 is %d, want MT_REC_PACKED", reqs[i], b[0])
		}
		e := event.Event{Stack: 5, OldPtr: 6, OldSize: 7}
		if err := decodeEvent(&e, b); err != nil {
			t.Fatalf("%s: %v", reqs[i], err)
		}
		got := in{uint64(e.Op), e.Ptr, e.Size, uint64(e.Kind), uint64(e.Flags), uint64(e.TID), e.TS}
		if got != c.in || e.Stack != 0 || e.OldPtr != 0 || e.OldSize != 0 {
			t.Errorf("%s: Go decodes %+v (stack %d old %d/%d)", reqs[i], got, e.Stack, e.OldPtr, e.OldSize)
		}
	}
}

// TestCookieMatchesC: cookies made by the one Go encoder, for chosen
// fields and for the probe points of this machine's libc, read back by
// the header's MT_CK() as the BPF programs read them, give the fields
// the encoder was given (clamped where they do not fit).
func TestCookieMatchesC(t *testing.T) {
	type fields struct{ op, sig, delta, before, after uint64 }
	const lim, freeLim = 1<<ckBeforeBits - 1, 1<<ckFreeBeforeBits - 1
	var want []fields
	var cookies []uint64
	add := func(c uint64, f fields) { cookies, want = append(cookies, c), append(want, f) }
	for _, f := range []fields{
		{uint64(logfmt.OpMalloc), sigSize0, 0, 0, 0},
		{uint64(logfmt.OpMmap), sigMmap, 0, lim, lim},
		{uint64(logfmt.OpFree), sigFreeChecked, 1<<ckFreeDeltaBits - 1, 123456, 654321},
		{uint64(logfmt.OpFree), sigFreeChecked, 1, freeLim, freeLim},
		{1<<ckOpBits - 1, 1<<ckSigBits - 1, 0, 1, 1 << 21},
	} {
		add(cookie(uint8(f.op), int(f.sig), f.delta, f.before, f.after), f)
	}
	// A range that does not fit turns the mmap family's test off, and
	// clamps free's; neither spills into other bits.
	add(cookie(uint8(logfmt.OpMunmap), 0, 0, 1<<30, 5), fields{uint64(logfmt.OpMunmap), 0, 0, 0, 0})
	add(cookie(uint8(logfmt.OpMremap), sigMremap, 0, 5, 1<<ckAfterBits), fields{uint64(logfmt.OpMremap), sigMremap, 0, 0, 0})
	add(cookie(uint8(logfmt.OpFree), sigFreeChecked, 3, 1<<30, 1<<40), fields{uint64(logfmt.OpFree), sigFreeChecked, 3, freeLim, freeLim})

	// What each probe point asks for.
	free := funcDef{"free", logfmt.OpFree, sigSize0, probeFree}
	mmap := funcDef{"mmap", logfmt.OpMmap, sigMmap, probeAlloc}
	munmap := funcDef{"munmap", logfmt.OpMunmap, 0, probeFree}
	malloc := funcDef{"malloc", logfmt.OpMalloc, sigSize0, probeAlloc}
	for _, c := range []struct {
		pp    probePoint
		check bool
		want  fields
	}{
		{probePoint{def: mmap, textFrom: 1000, textTo: 2000}, true, fields{uint64(logfmt.OpMmap), sigMmap, 0, 1000, 2000}},
		{probePoint{def: munmap, textFrom: 3, textTo: 4}, false, fields{uint64(logfmt.OpMunmap), 0, 0, 3, 4}},
		{probePoint{def: free, textFrom: 10, textTo: 20, delta: 4, x86: true}, true, fields{uint64(logfmt.OpFree), sigFreeChecked, 4, 10, 20}},
		{probePoint{def: free, textFrom: 10, textTo: 20, delta: 4, x86: true}, false, fields{uint64(logfmt.OpFree), sigSize0, 0, 0, 0}},
		{probePoint{def: free, textFrom: 10, textTo: 20, delta: 1 << ckFreeDeltaBits, x86: true}, true, fields{uint64(logfmt.OpFree), sigSize0, 0, 0, 0}},
		{probePoint{def: free, textFrom: 10, textTo: 20, delta: 4}, true, fields{uint64(logfmt.OpFree), sigSize0, 0, 0, 0}},
		{probePoint{def: malloc, textFrom: 10, textTo: 20}, true, fields{uint64(logfmt.OpMalloc), sigSize0, 0, 0, 0}},
		// MT_CK_ALIAS is BEFORE's lowest bit, which only the mmap
		// family uses otherwise; an aliased free is never checked.
		{probePoint{def: malloc, alias: true}, true, fields{uint64(logfmt.OpMalloc), sigSize0, 0, 1, 0}},
		{probePoint{def: free, alias: true, textFrom: 10, textTo: 20, delta: 4, x86: true}, true, fields{uint64(logfmt.OpFree), sigSize0, 0, 1, 0}},
	} {
		add(c.pp.cookie(c.check), c.want)
	}
	// This machine's libc: the mmap family's ranges fit (no test is off).
	pps, err := resolveLib(libcPath(t))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, pp := range pps {
		f := fields{uint64(pp.def.op), uint64(pp.def.sig), 0, 0, 0}
		switch pp.def.op {
		case logfmt.OpAlignedAlloc, logfmt.OpMemalign:
			if pp.alias {
				f.before = 1 // glibc's one function under both names
			}
		case logfmt.OpMmap, logfmt.OpMunmap, logfmt.OpMremap:
			f.before, f.after = pp.textFrom, pp.textTo
			checked++
		case logfmt.OpFree:
			if pp.x86 {
				f.sig, f.delta = sigFreeChecked, pp.delta
				f.before, f.after = min(pp.textFrom, freeLim), min(pp.textTo, freeLim)
			}
			checked++
		}
		add(pp.cookie(true), f)
	}
	if checked != 4 {
		t.Errorf("libc gave %d of mmap, munmap, mremap and free", checked)
	}

	reqs := make([]string, len(cookies))
	for i, c := range cookies {
		reqs[i] = fmt.Sprintf("cookie %x", c)
	}
	for i, line := range abiCheck(t, reqs) {
		var got fields
		if _, err := fmt.Sscanf(line, "%x %x %x %x %x", &got.op, &got.sig, &got.delta, &got.before, &got.after); err != nil {
			t.Fatalf("abi_check answered %q to %q: %v", line, reqs[i], err)
		}
		if got != want[i] {
			t.Errorf("cookie %#x: C reads %+v, Go encoded %+v", cookies[i], got, want[i])
		}
	}
}

// FuzzRecordDecode: any bytes from the ring buffer are taken by the
// decoder their type byte names, if long enough, and by no other; never a
// panic.
func FuzzRecordDecode(f *testing.F) {
	for typ, n := range map[recType]int{recPacked: packedSize, recEvent: eventSize, recThread: threadSize,
		recStack: stackSize, recFile: fileSize, recRemap: remapSize} {
		b := make([]byte, n)
		b[0] = byte(typ)
		for i := 1; i < n && i < 64; i++ {
			b[i] = 0xff
		}
		f.Add(b)
		f.Add(b[:n-1])
	}
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{7, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e event.Event
		var s event.Stack
		var fl event.File
		_, _, errT := decodeThread(b)
		_, errR := decodeRemap(b)
		errs := map[recType]error{recEvent: decodeEvent(&e, b), recThread: errT, recStack: decodeStack(&s, b), recFile: decodeFile(&fl, b), recRemap: errR}
		errs[recPacked] = errs[recEvent]
		size := map[recType]int{recPacked: packedSize, recEvent: eventSize, recThread: threadSize,
			recStack: stackSize, recFile: fileSize, recRemap: remapSize}
		typ := recordType(b)
		for dec, err := range errs {
			want := dec == typ || (dec == recPacked || dec == recEvent) && (typ == recPacked || typ == recEvent)
			want = want && len(b) >= size[typ]
			if (err == nil) != want {
				t.Fatalf("a %d-byte record of type %d: the decoder of type %d says %v", len(b), typ, dec, err)
			}
		}
		if errs[recStack] == nil && len(s.Frames) > maxFrames {
			t.Fatalf("%d frames decoded", len(s.Frames))
		}
		if errs[recFile] == nil && (!strings.HasPrefix(fl.Path, "/") || strings.Count(fl.Path, "/") > pathParts) {
			t.Fatalf("path %q decoded", fl.Path)
		}
	})
}
