package tracer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The end of the log the kernel gave for the --stack-threads bug (issue 11),
// cut down: what the summary must keep, and what it must leave out.
var stackThreadsLog = []string{
	"0: R1=ctx() R10=fp0",
	"; if (start + i >= 16 || m->comm[(start + i) & 15] != want) @ memtrace.bpf.c:317",
	"609: (bf) r7 = r5                     ; frame1: R5=fp[0](off=-24,var_off=(0x0; 0xf)) cb",
	"610: (0f) r7 += r3                    ; frame1: R3=9 R7=fp[0](off=-15,var_off=(0x0; 0xf)) cb",
	"611: (71) r7 = *(u8 *)(r7 +0)",
	"invalid variable-offset read from stack R7 var_off=(0x0; 0xf) off=-15 size=1",
	"processed 97621 insns (limit 1000000) max_states_per_insn 16 total_states 7995 peak_states 264 mark_read 0",
}

func TestLoadErrorClassification(t *testing.T) {
	wrap := func(err error) error {
		// How cilium/ebpf's LoadAndAssign wraps a program's failure.
		return fmt.Errorf("assign values: field MtEnter: program mt_enter: %w", err)
	}
	for _, c := range []struct {
		name        string
		err         error
		unavailable bool
		rejected    bool
		want        []string // in the message
		notWant     []string
	}{
		{"verifier", wrap(&ebpf.VerifierError{Cause: unix.EINVAL, Log: stackThreadsLog}), false, true,
			[]string{"mt_enter", "rejected by the verifier of this kernel (", "invalid variable-offset read from stack R7 var_off=(0x0; 0xf) off=-15 size=1",
				"insn 611: r7 = *(u8 *)(r7 +0)", "memtrace.bpf.c:317", "report this line"},
			[]string{"processed", "R1=ctx", "frame1", "bug in memtrace"}},
		{"verifier EACCES", wrap(&ebpf.VerifierError{Cause: unix.EACCES, Log: []string{"0: (79) r0 = *(u64 *)(r10 -8)", "invalid read from stack off -8+0 size 8"}}), false, true,
			[]string{"invalid read from stack off -8+0 size 8", "insn 0: r0 = *(u64 *)(r10 -8)"}, nil},
		{"bad relocation", wrap(&ebpf.VerifierError{Cause: errors.New("bad CO-RE relocation"), Log: []string{"12: (85) call unknown#195896080", "invalid func unknown#195896080"}}), false, true,
			[]string{"invalid func unknown#195896080"}, nil},
		{"old kernel helper", wrap(&ebpf.VerifierError{Cause: unix.EINVAL, Log: []string{"40: (85) call bpf_loop#181", "unknown func bpf_loop#181"}}), true, false,
			[]string{"bpf_loop", "Linux 5.17"}, nil},
		{"no permission", wrap(&ebpf.VerifierError{Cause: unix.EPERM}), true, false, []string{"not permitted"}, nil},
		{"map not permitted", fmt.Errorf("map events: %w", unix.EPERM), true, false, []string{"not permitted"}, nil},
		{"not supported", fmt.Errorf("map events: %w", ebpf.ErrNotSupported), true, false, []string{"lacks a BPF feature"}, nil},
		{"other", fmt.Errorf("map events: %w", unix.ENOMEM), false, false, []string{"load BPF programs"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := loadError(c.err)
			if got := errors.Is(err, ErrUnavailable); got != c.unavailable {
				t.Errorf("unavailable = %v, want %v: %v", got, c.unavailable, err)
			}
			var re *RejectedError
			if got := errors.As(err, &re); got != c.rejected {
				t.Errorf("rejected = %v, want %v: %v", got, c.rejected, err)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("the cause is not wrapped: %v", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("message has more than one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("message %q holds %q", msg, w)
				}
			}
		})
	}
}

// A log of thousands of lines still gives one short line.
func TestVerifierSummaryBounded(t *testing.T) {
	log := make([]string, 5000)
	for i := range log {
		log[i] = fmt.Sprintf("%d: (bf) r%d = r1 ; %s", i, i%10, strings.Repeat("R1=scalar() ", 50))
	}
	log = append(log, strings.Repeat("x", 10000))
	s := verifierSummary(log)
	if len(s) > 600 {
		t.Errorf("summary is %d bytes", len(s))
	}
	if !strings.Contains(s, "insn 4999: r9 = r1") {
		t.Errorf("summary %q does not name the last instruction", s)
	}
	if verifierSummary(nil) == "" || verifierSummary([]string{"processed 1 insns"}) == "" {
		t.Error("an empty log gives an empty summary")
	}
}

// FuzzVerifierSummary: whatever the kernel's log holds, the summary is one
// bounded line and nothing panics. The seeds run in plain go test.
func FuzzVerifierSummary(f *testing.F) {
	f.Add(strings.Join(stackThreadsLog, "\n"))
	f.Add("")
	f.Add("processed 1 insns\n")
	f.Add("; x @ a.c:1\n0: (95) exit\nR0 !read_ok\n")
	f.Add("1: (bf) r1 = r2 ; \n\n\n unknown func bpf_loop#181")
	f.Fuzz(func(t *testing.T, log string) {
		lines := strings.Split(log, "\n")
		s := verifierSummary(lines)
		if strings.Contains(s, "\n") {
			t.Fatalf("summary has a newline: %q", s)
		}
		if len(s) > 800 {
			t.Fatalf("summary is %d bytes", len(s))
		}
		err := loadError(&ebpf.VerifierError{Cause: unix.EINVAL, Log: lines})
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error has a newline: %q", err)
		}
	})
}
