package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const linkedSrc = `#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void *linked_leak(void) { return malloc(100); }
int main(int argc, char **argv) {
	static void *volatile keep;
	keep = linked_leak();
	char c;
	/* Attached to: waits for the test's go byte (or its end), so that
	 * memtrace -p attaches however slow its start-up is. */
	if (argc > 1)
		return read(0, &c, 1) < 0;
	return 0;
}
`

// TestStartedThroughALink: a program started through a link of another
// name (Debian's redis-server, a link to redis-check-rdb) is named as it
// was started (the header's comm= and cmd=, the report's title), with its
// real file beside it (exe=, the report's "program file:" line), which
// the stacks name as perf and heaptrack do: launched on both paths, and
// attached to with -p.
func TestStartedThroughALink(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	src := filepath.Join(dir, "real.c")
	if err := os.WriteFile(src, []byte(linkedSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real-file")
	if out, err := command("gcc", "-O1", "-g", "-o", real, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	link := filepath.Join(dir, "started-as")
	if err := os.Symlink("real-file", link); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, what, log string) {
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := bytes.Cut(data, []byte("\n"))
		for _, w := range []string{" comm=started-as ", " exe=" + real + " "} {
			if !bytes.Contains(header, []byte(w)) {
				t.Errorf("%s: header lacks %q: %s", what, w, header)
			}
		}
		// The stacks name the real file: symbols, build-ids and
		// source lines are read from it.
		if !regexp.MustCompile(regexp.QuoteMeta(real) + `\(linked_leak\+`).Match(data) {
			t.Errorf("%s: no frame of linked_leak in %s:\n%s", what, real, data)
		}
		code, out, se := memtraceRun(t, nil, "report", "--resolve", "0", log)
		if code != 0 {
			t.Fatalf("%s: report exit %d: %s", what, code, se)
		}
		want := fmt.Sprintf("program file: %s (the file stacks name; started as started-as)\n", real)
		if !strings.Contains(out, want) || !regexp.MustCompile(`memtrace report of pid \d+ started-as `).MatchString(out) {
			t.Errorf("%s: report lacks its title and %q:\n%s", what, want, out)
		}
	}
	for _, mode := range []string{"bpf", "preload"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "bpf" {
				requireBPF(t)
			}
			log := filepath.Join(t.TempDir(), "run.log")
			args := []string{"-o", log, "--", link}
			if mode == "preload" {
				args = append([]string{"--preload"}, args...)
			}
			if code, _, se := memtraceRun(t, nil, args...); code != 0 {
				t.Fatalf("memtrace exit %d: %s", code, se)
			}
			check(t, mode, log)
		})
	}
	t.Run("attach", func(t *testing.T) {
		requireBPF(t)
		prog := command(link, "wait")
		stdin, err := prog.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := prog.Start(); err != nil {
			t.Fatal(err)
		}
		defer prog.Wait()
		defer stdin.Close()
		log := filepath.Join(t.TempDir(), "run.log")
		mt := command(need(t, "bin/memtrace"), "-p", fmt.Sprint(prog.Process.Pid), "-o", log)
		se := new(lockedBuffer)
		mt.Stdout, mt.Stderr = se, se
		if err := mt.Start(); err != nil {
			t.Fatal(err)
		}
		defer mt.Process.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := waitHeader(ctx, log); err != nil {
			t.Fatalf("%v\nmemtrace: %s", err, se.String())
		}
		stdin.Write([]byte{'g'})
		if err := mt.Wait(); err != nil {
			t.Fatalf("memtrace -p: %v: %s", err, se.String())
		}
		data, _ := os.ReadFile(log)
		header, _, _ := bytes.Cut(data, []byte("\n"))
		if !bytes.Contains(header, []byte(" comm=started-as ")) || !bytes.Contains(header, []byte(" exe="+real+" ")) {
			t.Errorf("-p: header %s, want comm=started-as and exe=%s", header, real)
		}
	})
}
