// Package prof writes a CPU profile of memtrace itself when the
// environment asks for one (MEMTRACE_CPUPROFILE=FILE). It is a
// measurement hook for the benchmarks (scripts/bench-stacks.sh): the
// agent's CPU per event is what decides whether the traced program is
// slowed by memtrace's own work on the CPU next to it, and a profile says
// where that CPU goes. It is an environment variable and not a flag so that
// it costs the command line nothing and can be set on any run, under sudo
// as well (the file is created as the invoking user, like the log).
package prof
