// Package preload runs a program under memtrace's LD_PRELOAD library
// (memtrace-preload.so, the C library in this directory): the fallback for
// machines without BPF, and a drop-in for memtrack.so.
//
// The library is embedded in the memtrace binary when it was built after
// `make -C fallback-preload` (as `make build` does); otherwise Run looks for
// memtrace-preload.so beside the executable. No Go code runs inside the
// traced process: the library is plain C, configured through memtrack's
// MEMTRACK_* variables, which Run sets from Options.
package preload
