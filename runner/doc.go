// Package runner is what memtrace's two ways of tracing share: the options
// of a run, the log's output (a file, FILE.zst/.gz, stderr, -o none, or one
// viewer on --port/--listen), the agent.Session built from the options
// (--report-dir, --interval, the live model as its Observer through
// LiveObserver, procreport as its report sink: the wiring the agent does
// not know), the live
// endpoint (--http, --profile-dir), Ctrl-C and SIGTERM, the user behind
// sudo (the program runs as that user, the user's files are created as
// that user) and the closing lines.
//
// A Source captures the events: the eBPF tracer (launch) or the
// LD_PRELOAD library's reader (fallback-preload). Run starts the source,
// opens the output once the source's probes are in place, hands the
// source the Session, and ends the run; everything between the capture
// and the log is the same for both, so an option works identically on
// both paths. cmd/memtrace builds Options and calls Run with the eBPF
// source and, for a program memtrace starts, the LD_PRELOAD source as the
// fallback where eBPF is unavailable.
package runner
