package tracer

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// TestSampleDraw: bpf/mt_sample.h's countdown draw, compiled for the host
// as the BPF side runs it, is exponential with mean rate: its mean, its
// distribution at three points and its distance from the exact
// rate * -ln(u) over a million uniform inputs.
func TestSampleDraw(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		bpftest.Unavailable(t, "gcc not installed (it compiles bpf/mt_sample.h's draw)")
	}
	bin := filepath.Join(t.TempDir(), "sample_draw")
	if out, err := exec.Command("gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", "../bpf",
		"-o", bin, "testdata/sample_draw.c", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("compile testdata/sample_draw.c: %v\n%s", err, out)
	}
	const n = 1000000
	for _, rate := range []uint64{4096, 64 << 10, 512 << 10, MaxSampleRate} {
		cmd := exec.Command(bin)
		cmd.Stdin = strings.NewReader(fmt.Sprintf("%d %d\n", n, rate))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sample_draw: %v", err)
		}
		var mean, maxErr, q0, q1, q2 float64
		if _, err := fmt.Sscan(string(out), &mean, &maxErr, &q0, &q1, &q2); err != nil {
			t.Fatalf("sample_draw's answer %q: %v", out, err)
		}
		r := float64(rate)
		// The mean of n exponential draws has a relative deviation of
		// 1/sqrt(n): 0.1 %; 0.5 % is five of them.
		if math.Abs(mean-r)/r > 0.005 {
			t.Errorf("rate %d: the draws' mean is %.1f", rate, mean)
		}
		if maxErr > 2e-4*r+1 {
			t.Errorf("rate %d: a draw is %.1f bytes from rate*-ln(u)", rate, maxErr)
		}
		for i, x := range []float64{0.25, 1, 4} {
			want := -math.Expm1(-x)
			if got := []float64{q0, q1, q2}[i]; math.Abs(got-want) > 0.003 {
				t.Errorf("rate %d: %.3f of the draws are under %g*rate, want %.3f", rate, got, x, want)
			}
		}
	}
}
