//go:build !amd64 && !arm64

package fdtrace

// syscallCalls is empty where no table was written: New refuses to start.
var syscallCalls = map[uint32]Call{}
