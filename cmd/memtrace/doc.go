// Command memtrace traces a program's allocations and writes a
// memtrack-format log: `memtrace -- PROG` starts and traces a program,
// `memtrace -p PID` attaches, `memtrace --preload -- PROG` uses the
// LD_PRELOAD fallback, and `memtrace report LOG` reports. It parses the
// flags and wires them to launch (the eBPF path) and preload; see
// README.md and docs/cli.md.
package main
