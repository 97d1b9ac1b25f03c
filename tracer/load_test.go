//go:build amd64 || arm64

package tracer

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestNewLoadsEveryOption loads the programs with every setting that the
// verifier sees as a constant (the stack code is dead unless stack_depth
// and n_stack_threads are set): --stack-threads with --stack-depth did not
// load at all (issue 11), and memtrace fell back to LD_PRELOAD without a
// word.
func TestNewLoadsEveryOption(t *testing.T) {
	requireBPF(t)
	full := make([]string, 8)
	for i := range full {
		full[i] = strings.Repeat(string(rune('a'+i)), 15)
	}
	for _, c := range []struct {
		name    string
		opts    Options
		session bool
	}{
		{"plain", Options{}, true},
		{"depth", Options{StackDepth: 8}, true},
		{"depth+threads", Options{StackDepth: 8, StackThreads: []string{"main"}}, true},
		{"maxdepth+8threads", Options{StackDepth: maxFrames, StackThreads: full}, true},
		{"depth1+threads", Options{StackDepth: 1, StackThreads: []string{"x"}}, true},
		{"threads without depth", Options{StackThreads: []string{"main"}}, true},
		{"classic depth+threads", Options{NoMulti: true, StackDepth: 16, StackThreads: []string{"a", "b"}}, false},
		{"floor depth+threads", Options{Floor: true, StackDepth: 8, StackThreads: []string{"a"}}, true},
		{"follow check-frees depth+threads", Options{Follow: true, HoldExec: true, CheckInternalFrees: true, StackDepth: 8, StackThreads: []string{"a"}}, true},
		{"depth frame pointers", Options{StackDepth: 32, StackUnwind: "fp"}, true},
		{"classic maxdepth dwarf", Options{NoMulti: true, StackDepth: maxFrames, StackUnwind: "dwarf", UnwindRows: 1 << 16}, false},
		{"follow depth2 dwarf", Options{Follow: true, HoldExec: true, StackDepth: 2}, true},
		{"sample depth", Options{SampleRate: 512 << 10, StackDepth: 32}, true},
		{"classic sample follow check-frees", Options{NoMulti: true, SampleRate: 64 << 10, StackDepth: 16, Follow: true, HoldExec: true, CheckInternalFrees: true}, false},
		{"sample without stacks", Options{SampleRate: 1}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(c.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer tr.Close()
			// This kernel (6.18) has session uprobes: failing to use
			// them is a regression, not a fallback.
			if got := tr.Session(); got != c.session && kernelHasSessionUprobes() {
				t.Errorf("Session() = %v, want %v", got, c.session)
			}
		})
	}
}

// TestVerifierErrorIsNotUnavailable: a program the kernel's verifier
// refuses (here, one reading past the end of its context) is reported as
// memtrace's bug with the verifier's verdict, not as BPF being
// unavailable, which would send memtrace to the LD_PRELOAD fallback.
func TestVerifierErrorIsNotUnavailable(t *testing.T) {
	requireBPF(t)
	_, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "mt_bad",
		Type: ebpf.Kprobe,
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R0, asm.R1, 4096, asm.DWord),
			asm.Return(),
		},
		License: "GPL",
	})
	if err == nil {
		t.Fatal("the verifier accepted a read past the context")
	}
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("not a verifier error: %v", err)
	}
	got := loadError(err)
	if errors.Is(got, ErrUnavailable) {
		t.Fatalf("a verifier error is classified as BPF unavailable: %v", got)
	}
	var re *RejectedError
	if !errors.As(got, &re) {
		t.Fatalf("not a RejectedError: %v", got)
	}
	msg := got.Error()
	if !strings.Contains(msg, "invalid bpf_context access off=4096 size=8") || !strings.Contains(msg, "insn 0: r0 = *(u64 *)(r1 +4096)") || strings.Contains(msg, "\n") {
		t.Errorf("message %q: want one line with the verdict and the instruction", msg)
	}
}

// TestNewRefusesBadUnwind: an unknown unwinding mode or a table size out
// of range is one error, not a silent default.
func TestNewRefusesBadUnwind(t *testing.T) {
	requireBPF(t)
	for _, o := range []Options{{StackDepth: 8, StackUnwind: "lbr"}, {StackDepth: 8, UnwindRows: -1}} {
		tr, err := New(o)
		if err == nil {
			tr.Close()
			t.Errorf("New(%+v) accepted", o)
		} else if errors.Is(err, ErrUnavailable) {
			t.Errorf("New(%+v): %v is not a usage error", o, err)
		}
	}
}
