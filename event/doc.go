// Package event is what a capture hands the agent, whichever captured it:
// allocation, free, fork, exec and exit events, the stacks they refer to
// and the files their frames lie in. The eBPF tracer (tracer) decodes its
// ring buffer into these types and the LD_PRELOAD reader
// (fallback-preload) its shared-memory records; agent.Session turns them
// into log lines. The numbers mirror bpf/memtrace.h, which tracer's tests
// check.
package event
