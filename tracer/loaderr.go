package tracer

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// RejectedError is a failure of memtrace's own BPF programs to load on a
// kernel that has BPF and every helper they call: the verifier refused
// one, or a relocation did not apply. On a kernel of the matrix
// (docs/kernels.md) it is a bug; elsewhere it may be the kernel's limit,
// so the message blames neither. It is not ErrUnavailable: the tests,
// which assert mode=bpf, fail on it, and launch mode falls back to
// LD_PRELOAD with it as the notice (launch.Source.Start).
type RejectedError struct {
	Program string // the program named in the error, "" if none was
	Summary string // the verifier's verdict and where, on one line
	Err     error
}

func (e *RejectedError) Error() string {
	prog := "the BPF programs were"
	if e.Program != "" {
		prog = "the BPF program " + e.Program + " was"
	}
	return fmt.Sprintf("%s rejected by the verifier of this kernel (%s): %s: memtrace's eBPF path is tested on the kernels docs/kernels.md lists; report this line", prog, kernelVersion(), e.Summary)
}

func (e *RejectedError) Unwrap() error { return e.Err }

var progInErr = regexp.MustCompile(`\bprogram ([A-Za-z0-9_]+): `)

// failedProgram names the program a collection load error is about.
func failedProgram(err error) string {
	if m := progInErr.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// loadError says what a failure to create memtrace's maps and programs
// means. Only a kernel that cannot run them at all (no permission, BPF
// features or helpers it lacks, no BTF) wraps ErrUnavailable, which lets
// memtrace fall back to LD_PRELOAD; a program the verifier refuses is a
// *RejectedError.
func loadError(err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("%w: this kernel lacks a BPF feature memtrace needs: %w", ErrUnavailable, err)
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) && len(ve.Log) > 0 {
		if h := missingHelper(ve.Log); h != "" {
			return fmt.Errorf("%w: this kernel lacks the BPF helper %s (memtrace needs Linux 5.17 or later): %w", ErrUnavailable, h, err)
		}
		return &RejectedError{Program: failedProgram(err), Summary: verifierSummary(ve.Log), Err: err}
	}
	// EPERM and EACCES before the verifier ran (no log): a missing
	// capability, a seccomp filter or a locked-down kernel.
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: not permitted to load BPF programs (CAP_BPF and CAP_PERFMON, or a lockdown or seccomp policy): %w", ErrUnavailable, err)
	}
	return fmt.Errorf("load BPF programs: %w", err)
}

var unknownHelper = regexp.MustCompile(`^unknown func (bpf_[a-z0-9_]+)#`)

// missingHelper returns the helper an older kernel does not know, if that
// is what the verifier stopped at.
func missingHelper(log []string) string {
	for i := len(log) - 1; i >= 0 && i >= len(log)-3; i-- {
		if m := unknownHelper.FindStringSubmatch(log[i]); m != nil {
			return m[1]
		}
	}
	return ""
}

var insnLine = regexp.MustCompile(`^([0-9]+): \([0-9a-f]{2}\) (.*)$`)

// verifierSummary is the end of a verifier log on one line: the verdict,
// the instruction it is about and the source line (from BTF line info)
// that instruction came from. The whole log runs to thousands of lines.
func verifierSummary(log []string) string {
	end := len(log)
	for end > 0 && (strings.HasPrefix(log[end-1], "processed ") || strings.TrimSpace(log[end-1]) == "") {
		end--
	}
	if end == 0 {
		return "no verifier message"
	}
	msg := clip(strings.TrimSpace(log[end-1]), 300)
	var insn, src string
	for i := end - 2; i >= 0 && i >= end-40 && src == ""; i-- {
		l := strings.TrimSpace(log[i])
		if insn == "" {
			if m := insnLine.FindStringSubmatch(l); m != nil {
				// Drop the register state the verifier appends.
				text, _, _ := strings.Cut(m[2], " ; ")
				insn = "insn " + m[1] + ": " + strings.TrimSpace(text)
				continue
			}
		}
		if insn != "" && strings.HasPrefix(l, "; ") {
			if _, at, ok := strings.Cut(l, " @ "); ok {
				src = at
			}
		}
	}
	var where []string
	for _, s := range []string{insn, src} {
		if s != "" {
			where = append(where, clip(s, 120))
		}
	}
	if len(where) == 0 {
		return msg
	}
	return msg + " (at " + strings.Join(where, ", ") + ")"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// kernelVersion is uname -r.
func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
