//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The compat build of the programs (bpf/mt_compat.h, -DMT_COMPAT) runs
// on kernels without the attach cookie (5.15): each probe's link runs a
// stub that stores the probe's cookie in compat_cookie and tail-calls the
// real program, which reads it back there. The stubs are built here, one
// per (program, cookie), and kept until Close.

// compatStubs holds the stubs and the tail-call slots of one tracer.
type compatStubs struct {
	mu     sync.Mutex
	cookie *ebpf.Map // compat_cookie: per CPU, one u64
	progs  *ebpf.Map // compat_progs: the stubs' targets
	slot   map[*ebpf.Program]uint32
	stubs  map[compatKey]*ebpf.Program
}

type compatKey struct {
	prog   *ebpf.Program
	cookie uint64
}

func newCompatStubs(maps map[string]*ebpf.Map) (*compatStubs, error) {
	c := &compatStubs{cookie: maps["compat_cookie"], progs: maps["compat_progs"],
		slot: map[*ebpf.Program]uint32{}, stubs: map[compatKey]*ebpf.Program{}}
	if c.cookie == nil || c.progs == nil {
		return nil, fmt.Errorf("load BPF object: the compat build lacks its stub maps: %w", errMissingObject)
	}
	return c, nil
}

// stub returns the program to attach in place of prog with cookie: one
// that stores cookie and tail-calls prog.
func (c *compatStubs) stub(prog *ebpf.Program, cookie uint64) (*ebpf.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.stubs[compatKey{prog, cookie}]; s != nil {
		return s, nil
	}
	slot, ok := c.slot[prog]
	if !ok {
		slot = uint32(len(c.slot))
		if slot >= c.progs.MaxEntries() {
			return nil, fmt.Errorf("compat stubs: more than %d programs to tail-call: a bug in memtrace", c.progs.MaxEntries())
		}
		if err := c.progs.Put(slot, uint32(prog.FD())); err != nil {
			return nil, fmt.Errorf("compat stubs: add a program to the tail-call array: %w", err)
		}
		c.slot[prog] = slot
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, c.cookie.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadImm(asm.R1, int64(cookie), asm.DWord),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, c.progs.FD()),
		asm.Mov.Imm(asm.R3, int32(slot)),
		asm.FnTailCall.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
	s, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "mt_stub", Type: ebpf.Kprobe, Instructions: insns, License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("compat stubs: load a probe's stub: %w", err)
	}
	c.stubs[compatKey{prog, cookie}] = s
	return s, nil
}

func (c *compatStubs) close() {
	if c == nil {
		return
	}
	for _, s := range c.stubs {
		s.Close()
	}
	c.cookie.Close()
	c.progs.Close()
}

// probeProg is what a classic uprobe link of prog with cookie attaches:
// prog and cookie themselves, or with the compat build a stub carrying
// the cookie (and the link none).
func (t *Tracer) probeProg(prog *ebpf.Program, cookie uint64) (*ebpf.Program, uint64, error) {
	if t.compat == nil {
		return prog, cookie, nil
	}
	s, err := t.compat.stub(prog, cookie)
	return s, 0, err
}

// Compat says why the tracer loaded the compat build of its programs
// ("this kernel (5.10.0-35-amd64) lacks the BPF helper
// bpf_get_current_task_btf (Linux 5.11)", or MEMTRACE_BPF_COMPAT=1), or
// "" for the default build.
func (t *Tracer) Compat() string { return t.compatLacks }
