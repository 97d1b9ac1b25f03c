package exitreport

import (
	"fmt"
	"strings"
	"time"
)

// Entry is a call stack and the live memory it holds.
type Entry struct {
	Bytes, Blocks uint64
	Stack         string // "f < g < main", innermost first
}

// FD is a descriptor open at exit (a leak).
type FD struct {
	FD         int32
	Kind, Call string
	Path       string
	Stack      string // the opening call's, "open64 < fopen < main"; "" without --stack-depth
}

// Report is one process's figures.
type Report struct {
	Process    string // comm
	PID        uint32
	Cmd        string
	End        time.Time
	AllocCalls uint64
	AllocBytes uint64
	Current    uint64 // live at exit, the built-in suppressions' out: the leak total
	Peak       uint64
	PeakUS     uint64 // µs since tracing started
	LeakBlocks uint64
	// SuppressedBlocks and SuppressedBytes are the blocks live at exit
	// that the built-in suppressions match (system libraries' own), left
	// out of Current and LeakBlocks as the report leaves them out.
	SuppressedBlocks, SuppressedBytes uint64
	PeakTop                           []Entry // stacks live at the peak
	Leaks                             []Entry // stacks live at exit
	OpenFDs                           []FD
}

// Name is the file name stem: <process>_<timestamp>, the process being
// comm-pid so that two processes of one name never collide.
func (r *Report) Name() string {
	proc := strings.Map(func(c rune) rune {
		if c == '/' || c == ' ' || c < ' ' {
			return '_'
		}
		return c
	}, r.Process)
	return fmt.Sprintf("%s-%d_%s", proc, r.PID, r.End.UTC().Format("20060102T150405.000Z"))
}
