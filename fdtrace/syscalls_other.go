//go:build !amd64 && !arm64

package fdtrace

import "github.com/memtrace/memtrace/event/fdevent"

// syscallCalls is empty where no table was written: New refuses to start.
var syscallCalls = map[uint32]fdevent.Call{}
