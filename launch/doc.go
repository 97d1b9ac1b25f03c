// Package launch is memtrace's eBPF run: it starts PROG through the exec
// shim (memtrace re-executed, held until the probes are on, then exec'ing
// PROG as the user behind sudo) or attaches to running processes, runs the
// event loop from the tracer's ring buffer to the agent's log, starts the
// watchdog that resumes held processes if memtrace dies, and turns Ctrl-C
// into a detach. cmd/memtrace parses flags and calls Run; the re-exec
// entry points RunShim and RunWatchdog are called from its main.
package launch
