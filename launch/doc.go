// Package launch is memtrace's eBPF source (a runner.Source): it starts
// PROG through the exec shim (memtrace re-executed, held until the probes
// are on, then exec'ing PROG as the user behind sudo) or attaches to
// running processes, runs the event loop from the tracer's ring buffer into
// the runner's agent.Session (rescans for dlopen'ed allocators, probing
// forks and execs), and starts the watchdog that resumes held processes if
// memtrace dies. cmd/memtrace parses flags and calls runner.Run with New();
// the re-exec entry points RunShim and RunWatchdog are called from its
// main.
package launch
