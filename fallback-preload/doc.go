// Package preload runs a program under memtrace's LD_PRELOAD library
// (memtrace-preload.so, the C library in this directory): the fallback for
// machines without BPF, and a drop-in for memtrack.so.
//
// The library is embedded in the memtrace binary when it was built after
// `make -C fallback-preload` (as `make build` does); otherwise Run looks for
// memtrace-preload.so beside the executable. No Go code runs inside the
// traced process: the library is plain C. Run uses its binary mode: the
// library appends 32-byte records to a shared-memory region (shm.go) and
// Run reads them while the program runs (convert.go: clock conversion and
// the merge of the threads' streams in time order), turning each into the
// eBPF tracer's event for an agent.Session, which writes the log as for
// the eBPF path, to a file, stderr or one TCP viewer (viewer.go); a
// SIGINT or SIGTERM detaches, and the log ends with the summary line.
// Used alone (LD_PRELOAD with memtrack's MEMTRACK_* variables) the library
// formats and writes the text log itself. docs/preload.md describes both.
package preload
