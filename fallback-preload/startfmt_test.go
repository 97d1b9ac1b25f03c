package preload

import (
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// TestStartMatchesLogfmt: the text mode's start= (put_start in
// c/text_fmt.c) is logfmt.StartLayout's text of the same instant, for
// nanoseconds with every count of trailing zeros, none at all, instants
// before 1970 and the last one logfmt reads.
func TestStartMatchesLogfmt(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is missing: it builds the library")
	}
	bin := filepath.Join(t.TempDir(), "start_fmt")
	if out, err := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", "c", "-o", bin,
		"testdata/start_fmt.c", "c/text_fmt.c").CombinedOutput(); err != nil {
		t.Fatalf("compile testdata/start_fmt.c: %v\n%s", err, out)
	}
	times := []time.Time{
		time.Unix(0, 0),
		time.Unix(1733000000, 123456789),
		time.Unix(-1, 500000000),
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	}
	for ns := 1; ns < 1e9; ns *= 10 {
		times = append(times, time.Unix(1733000000, int64(ns)), time.Unix(1733000000, int64(ns)*7))
	}
	r := rand.New(rand.NewSource(13))
	for range 500 {
		times = append(times, time.Unix(r.Int63n(253402300800), r.Int63n(1e9)))
	}
	var in strings.Builder
	for _, tm := range times {
		fmt.Fprintf(&in, "%d %d\n", tm.Unix(), tm.Nanosecond())
	}
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start_fmt: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(times) {
		t.Fatalf("start_fmt gave %d lines for %d times", len(got), len(times))
	}
	for i, tm := range times {
		if want := tm.UTC().Format(logfmt.StartLayout); got[i] != want {
			t.Errorf("%d s %d ns: the library writes %s, logfmt %s", tm.Unix(), tm.Nanosecond(), got[i], want)
		}
	}
}
