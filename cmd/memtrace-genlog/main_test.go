package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The benches compare readers over logs made again from a seed, so a seed
// must give the same log byte for byte, with the number of events asked.
func TestSameSeedSameLog(t *testing.T) {
	dir := t.TempDir()
	gen := func(name string, o options) []byte {
		o.out = filepath.Join(dir, name)
		if err := run(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, memtrack := range []bool{false, true} {
		o := options{events: 5000, threads: 3, stackFrac: 0.5, leakFrac: 0.05, depth: 4, seed: 7,
			memtrack: memtrack, procs: 2, pool: stackPool{n: 50}}
		a, b := gen("a", o), gen("b", o)
		if !bytes.Equal(a, b) {
			t.Fatalf("memtrack=%v: two runs with seed 7 differ", memtrack)
		}
		if n := bytes.Count(a, []byte("ptr=")); n != o.events {
			t.Errorf("memtrack=%v: %d event lines, want %d", memtrack, n, o.events)
		}
		if memtrack == bytes.Contains(a, []byte("[memtrace]")) {
			t.Errorf("memtrack=%v: [memtrace] lines present=%v", memtrack, !memtrack)
		}
		o.seed = 8
		if bytes.Equal(a, gen("c", o)) {
			t.Errorf("memtrack=%v: seeds 7 and 8 gave the same log", memtrack)
		}
	}
}
