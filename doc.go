// Package memtrace is the repository root. It holds only gen.go, whose
// generate directives build the BPF objects (bpf/*.bpf.c) into the tracer
// and fdtrace packages with bpf2go; the commands are under cmd/.
package memtrace
