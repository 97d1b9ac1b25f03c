package main

import (
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// wrapperLog is a library's allocations, every one through its malloc
// wrapper, from three callers: 300, 200 and 100 bytes leaked, 50 freed.
func wrapperLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "55"}, logfmt.KV{Key: "comm", Value: "db"}, logfmt.KV{Key: "cmd", Value: "./db"})
	ts, total := uint64(1000), uint64(0)
	site := func(size, ptr uint64, caller string) {
		ts += 1000
		total += size
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", ts, size, total, ptr)
		for k, n := range []string{"sqlite3Malloc", caller, "main"} {
			b = logfmt.AppendFrame(b, k, "/usr/lib/libsqlite3.so.0", n, uint64(0x40+k), 0x7f0000001000+0x100*uint64(k))
		}
	}
	site(300, 0x1000, "sqlite3VdbeCreate")
	site(200, 0x2000, "sqlite3ParserAlloc")
	site(100, 0x3000, "openDatabase")
	site(50, 0x4000, "openDatabase2")
	ts += 10
	b = logfmt.AppendFree(b, 1, "main", "free", ts, 50, 0x4000)
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

func TestTmuxTreesAndIcicle(t *testing.T) {
	p := writeTemp(t, "db.log", wrapperLog())
	tm := newTerm(t, bin+" "+p)
	tm.waitFor("✕ DONE", "4 allocs")
	// Groups named apart by the caller, not all "sqlite3Malloc".
	tm.send("\\")
	tm.waitFor("Call site", "sqlite3Malloc ← sqlite3VdbeCreate", "sqlite3Malloc ← sqlite3ParserAlloc", "sqlite3Malloc ← openDatabase2")
	tm.send("\\")
	tm.waitFor("Detail [")

	tm.send("c")
	// A node is a function at its call site (the offset: the log has no
	// lines), and the tree opens down to its first branch: main.
	tm.waitFor("Call tree top-down, leaked: 600B in all", "▾ main+0x42", "▸ sqlite3VdbeCreate+0x41")
	tm.waitUntil("the tree's figures", func(s string) bool {
		return strings.Contains(s, "300B  50.0%    ▸ sqlite3VdbeCreate+0x41") && strings.Contains(s, "100B  16.7%    ▸ openDatabase+0x41") && !strings.Contains(s, "openDatabase2")
	})
	tm.send("Enter") // collapse main
	tm.waitUntil("main collapsed", func(s string) bool {
		return strings.Contains(s, "▸ main") && !strings.Contains(s, "sqlite3VdbeCreate")
	})
	tm.send("C", "C") // peak, then allocated
	tm.waitFor("Call tree top-down, allocated: 650B in all")
	tm.send("u")
	tm.waitFor("Call tree bottom-up, allocated: 650B in all", "sqlite3Malloc")

	tm.send("?")
	tm.waitFor("memview keys", "call tree of the cost")
	tm.send("PgDn", "PgDn")
	tm.waitFor("In the call tree (c) and the icicle (i):", "zoom out one level")
	tm.send("x")
	tm.waitUntil("the help closed", func(s string) bool { return !strings.Contains(s, "memview keys") })

	tm.send("u", "i")
	tm.waitFor("Icicle top-down, allocated: 650B in all   zoom: all", "▸ all  650B (100.0%)")
	tm.send("Down", "Down")
	tm.waitFor("▸ sqlite3VdbeCreate+0x41  300B (46.2%)")
	tm.send("Enter")
	tm.waitFor("zoom: all ▸ main+0x42 ▸ sqlite3VdbeCreate+0x41")
	// Zoomed, the frame and its callee span the terminal's width (138
	// columns inside the borders).
	tm.waitUntil("the zoomed frame across the width", func(s string) bool {
		return strings.Contains(s, "│sqlite3VdbeCreate+0x41"+strings.Repeat(" ", 138-len("sqlite3VdbeCreate+0x41")-1)+"▕│")
	})
	tm.send("BSpace")
	tm.waitFor("zoom: all ▸ main+0x42 ")
	tm.send("Escape")
	tm.waitUntil("zoomed out to the whole", func(s string) bool { return strings.Contains(s, "zoom: all  ") })
	tm.send("Escape")
	tm.waitFor("Detail [")
	tm.send("q")
	tm.waitGone()
}
