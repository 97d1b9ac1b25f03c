// Package event is what a capture hands the agent, whichever captured it:
// allocation, free, fork, exec and exit events, the stacks they refer to
// and the files their frames lie in, and the ops that name the calls (Op,
// generated from internal/ops/table.go; logfmt.Op is this type) with
// SymbolOp, the op a PLT stub's name logs. The eBPF tracer (tracer)
// decodes its ring buffer into these types and the LD_PRELOAD reader
// (fallback-preload) its shared-memory records; agent.Session turns them
// into log lines. Descriptor events are its fdevent package's. The
// numbers mirror bpf/memtrace.h, which tracer's tests check. It is a leaf:
// the captures, the agent and logfmt all import it, it imports none of
// them.
package event
