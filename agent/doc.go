// Package agent turns allocation events into a memtrack-format log, for
// both tracers: the eBPF tracer's decoded events (Add, Drain) and the
// preload reader's, already in time order and with stacks named in the
// traced process (Emit, ResolvedStack; Config.InProcess). It
// puts events in time order, keeps each process's live blocks (so that a
// free line carries the size it releases), each thread's running total and
// name, applies --min-size and --track-threads, and writes the header,
// lost-record lines and the closing summary. It writes only through logfmt.
//
// It reads the event vocabulary (event, event/fdevent), not a capture, and
// calls only what it defines itself: an Observer (the runner hands it the
// live model) and OnProcessReport (the runner's sink, procreport). It
// imports neither capture (tracer, fdtrace) nor live, procreport or
// analysis; TestEngineOwnsItsInterfaces holds it to that.
package agent
