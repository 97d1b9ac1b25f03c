// Package bpftest holds the one rule for tests that need BPF: they skip
// only where BPF is really unavailable (not root, no kernel BTF), and
// MEMTRACE_REQUIRE_BPF=1 (set by CI, whose machines have BPF) turns that
// skip into a failure.
package bpftest
