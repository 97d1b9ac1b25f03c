package report

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

var (
	startup  = []fr{{"__libc_start_call_main", 0x1}, {"__libc_start_main", 0x2}, {"_start", 0x3}}
	trampoln = []fr{{"start_thread", 0x4}, {"clone3", 0x5}}
)

func with(a []fr, b ...[]fr) []fr {
	out := append([]fr(nil), a...)
	for _, x := range b {
		out = append(out, x...)
	}
	return out
}

// readableLog has stacks that run into the C library's start-up code, on
// the main thread and another, C++ template instances, and a function
// whose stacks are temporary on one path only.
func readableLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "100", "comm", "app")
	vec := with([]fr{{"_ZNSt6vectorIiSaIiEE9push_backERKi", 0x10}, {"main", 0x20}}, startup)
	l.alloc(1, "app", "malloc", 10, 64, 0x100, vec...)
	l.alloc(2, "worker", "malloc", 11, 32, 0x200, with([]fr{{"worker_alloc", 0x30}, {"worker", 0x40}}, trampoln)...)
	// Box<int>::fill() and Box<double>::fill(): alike once shortened.
	l.alloc(1, "app", "malloc", 12, 8, 0x300, with([]fr{{"_ZN3BoxIiE4fillEv", 0x50}, {"main", 0x60}}, startup)...)
	l.alloc(1, "app", "malloc", 13, 8, 0x310, with([]fr{{"_ZN3BoxIdE4fillEv", 0x70}, {"main", 0x80}}, startup)...)
	// make_tmp from main: 2 temporaries; from keep: 3 allocations kept.
	tmp := with([]fr{{"make_tmp", 0x90}, {"main", 0xa0}}, startup)
	kept := with([]fr{{"make_tmp", 0x90}, {"keep", 0xb0}, {"main", 0xc0}}, startup)
	ts := uint64(20)
	for k := range uint64(2) {
		l.alloc(1, "app", "malloc", ts, 16, 0x400+k*0x10, tmp...).free(1, "app", ts+1, 16, 0x400+k*0x10)
		ts += 2
	}
	for k := range uint64(3) {
		l.alloc(1, "app", "malloc", ts, 16, 0x500+k*0x10, kept...)
		ts++
	}
	l.exit(2, "worker", ts)
	l.ended(ts, 100)
	return l.b
}

func TestStacksEndAtMain(t *testing.T) {
	log := writeFile(t, "readable.log", readableLog())
	out, errs, code := runMain(t, "-p", "0", "-l", "0", "-T", "0", log)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, f := range []string{"__libc_start_call_main", "__libc_start_main", "_start", "start_thread", "clone3"} {
		if strings.Contains(out, "    "+f+"\n") {
			t.Errorf("default report shows start-up frame %s:\n%s", f, out)
		}
	}
	mustContain(t, out,
		"1 calls with 32B peak consumption from:\n    worker\n      in /nonexistent/app\n\n",
		"std::vector<>::push_back(int const&)\n  in /nonexistent/app\n1 calls with 64B peak consumption from:\n    main\n      in /nonexistent/app\n\n",
	)
	full, _, _ := runMain(t, "-p", "0", "-l", "0", "-T", "0", "--full-stacks", log)
	mustContain(t, full,
		"    worker\n      in /nonexistent/app\n    start_thread\n      in /nonexistent/app\n    clone3\n",
		"    main\n      in /nonexistent/app\n    __libc_start_call_main\n      in /nonexistent/app\n    __libc_start_main\n      in /nonexistent/app\n    _start\n",
	)
	// JSON keeps every frame and full names.
	js, _, _ := runMain(t, "--json", "-", log)
	var j jsonReport
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	var fns []string
	for _, e := range j.Rankings.get("calls") {
		for _, f := range e.Stack {
			fns = append(fns, f.Function)
		}
	}
	for _, want := range []string{"_start", "clone3", "std::vector<int, std::allocator<int> >::push_back(int const&)"} {
		if !slices.Contains(fns, want) {
			t.Errorf("JSON stacks lack %q: %q", want, fns)
		}
	}
}

func TestTemplateNames(t *testing.T) {
	log := writeFile(t, "readable.log", readableLog())
	out, _, _ := runMain(t, "-p", "0", "-l", "0", "-T", "0", log)
	mustContain(t, out, "\nstd::vector<>::push_back(int const&)\n",
		// Shortened, the two instances would read alike: their full names.
		"\nBox<int>::fill()\n", "\nBox<double>::fill()\n")
	if strings.Contains(out, "std::allocator") {
		t.Errorf("template arguments shown by default:\n%s", out)
	}
	for _, args := range [][]string{{"--full-names"}, {"-t", "0"}, {"--shorten-templates=0"}} {
		full, _, code := runMain(t, append(args, "-p", "0", "-l", "0", "-T", "0", log)...)
		if code != 0 {
			t.Fatalf("%q: exit %d", args, code)
		}
		mustContain(t, full, "\nstd::vector<int, std::allocator<int> >::push_back(int const&)\n")
	}
}

// The entry's "of N allocations in total" is the function's own total:
// every stack's allocations, those without temporaries too.
func TestTemporaryOfTotal(t *testing.T) {
	log := writeFile(t, "readable.log", readableLog())
	out, _, _ := runMain(t, "-a", "0", "-p", "0", "-l", "0", log)
	mustContain(t, out,
		"MOST TEMPORARY ALLOCATIONS\n2 temporary allocations of 5 allocations in total (40.00%) from\nmake_tmp\n  in /nonexistent/app\n2 temporary allocations of 2 allocations in total (100.00%) from:\n    main\n",
		"calls to allocation functions: 9 ",
		"temporary memory allocations: 2 ",
	)
}

// The HTML's rows share their allocating function: each is named by the
// frame that tells it apart, every frame at its call site (the offset
// where the log has no line).
func TestHTMLRowLabels(t *testing.T) {
	log := writeFile(t, "readable.log", readableLog())
	out, _, _ := runMain(t, "--html", "-", log)
	mustContain(t, out, "<summary><code>make_tmp+0x90 ← keep+0xb0</code>", "<summary><code>make_tmp+0x90 ← main+0xa0</code>", "<summary><code>std::vector&lt;&gt;::push_back(int const&amp;)+0x10</code>")
}

// splitLog's peak (12338 bytes at ts 14) holds two mappings and a heap
// block; the malloc family alone peaked earlier (100 bytes at ts 10).
// Left at the end: the 50-byte block and the 4096-byte mapping.
func splitLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "100", "comm", "app")
	st := []fr{{"load", 0x10}, {"main", 0x20}}
	l.alloc(1, "app", "malloc", 10, 100, 0x100, st...).free(1, "app", 11, 100, 0x100)
	l.alloc(1, "app", "mmap", 12, 4096, 0x7000, st...)
	l.alloc(1, "app", "malloc", 13, 50, 0x200, st...)
	l.alloc(1, "app", "mmap", 14, 8192, 0x9000, st...)
	l.b = logfmt.AppendFree(l.b, 1, "app", "munmap", 15, 8192, 0x9000)
	l.ended(16, 100)
	return l.b
}

func TestPeakAndLeaksSplit(t *testing.T) {
	log := writeFile(t, "split.log", splitLog())
	out, errs, code := runMain(t, "-a", "0", "-p", "0", "-l", "0", "-T", "0", log)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	mustContain(t, out,
		"peak heap memory consumption: 12.34K after 0.000014s\n  of which malloc family 50B, mmap 12.29K; the malloc family alone peaks at 100B after 0.000010s (heaptrack, which does not trace mmap, reports that one)\n",
		"total memory leaked: 4.15K (2 leaks)\n  of which malloc family 50B (1 blocks), mmap 4.10K (1 mappings)\n",
	)
	js, _, _ := runMain(t, "--json", "-", log)
	var j jsonReport
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	s := j.Summary
	if s.PeakMallocBytes == nil || *s.PeakMallocBytes != 50 || *s.PeakMmapBytes != 12288 || *s.MallocOwnPeakBytes != 100 || *s.MallocOwnPeakTimeS != 0.00001 ||
		*s.MallocLeaks != 1 || *s.MallocLeakedBytes != 50 || *s.MmapLeaks != 1 || *s.MmapLeakedBytes != 4096 {
		t.Fatalf("split figures: %s", js)
	}
}

// Without a mapping the peak is the malloc family's own: one short line.
func TestPeakSplitWithoutMappings(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	out, _, _ := runMain(t, log)
	mustContain(t, out, "peak heap memory consumption: 7.00K after 0.000018s\n  of which malloc family 7.00K, mmap 0B (no mapping in the log)\ntotal memory leaked: 2.01K (3 leaks)\n  of which malloc family 2.01K (3 blocks), mmap 0B (0 mappings)\n")
}
