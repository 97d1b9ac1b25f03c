// Package bpftest holds the rules for tests that need BPF: they skip
// only where BPF is really unavailable (not root, no kernel BTF), and
// MEMTRACE_REQUIRE_BPF=1 (set by CI, whose machines have BPF) turns that
// skip into a failure (Require); and a test of the eBPF path checks that
// its log says mode=bpf, not the LD_PRELOAD fallback's mode (RequireModeBPF).
package bpftest
