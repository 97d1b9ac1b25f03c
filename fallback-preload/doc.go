// Package preload runs a program under memtrace's LD_PRELOAD library
// (memtrace-preload.so, the C library in this directory): the fallback for
// machines without BPF, and a drop-in for memtrack.so.
//
// The library is embedded in the memtrace binary when it was built after
// `make -C fallback-preload` (as `make build` does); otherwise Run looks for
// memtrace-preload.so beside the executable. No Go code runs inside the
// traced process: the library is plain C. Source is the library as a
// runner.Source, memtrace's one runner with the eBPF path's: the library
// appends 32-byte records to a shared-memory region (shm.go) and Source
// reads them while the program runs (convert.go: clock conversion and the
// merge of the threads' streams in time order), turning each into the
// event an agent.Session takes; the runner owns the rest (the Session, the
// output, the viewer wait, --http, Ctrl-C, the closing lines). A SIGINT or
// SIGTERM detaches, and the log ends with the summary line. Used alone
// (LD_PRELOAD with memtrack's MEMTRACK_* variables) the library formats
// and writes the text log itself (Options.Text). docs/preload.md
// describes both.
package preload
