// Package analysis is memtrace's model of a log: the one place where events
// are stored, stacks interned, frees matched to allocations, leaks decided
// (docs/spec.md §4.3) and told from blocks whose frees the tracer lost
// (lost.go), truncated stacks counted (truncated.go), and per-thread, per-process,
// per-call-stack and timeline figures computed, saturating rather than
// wrapping (sat.go). memview renders it and `memtrace report` ranks it; it
// imports no terminal library.
//
// The store is columnar (one slice per field, indexed by allocation id) so
// that a log of millions of events costs tens of bytes per event and no
// pointer per event. Names, frames and stacks are interned. Filters run over
// precomputed sorted permutations and per-thread indexes; sorting is done
// once per key and extended on append, so live mode appends without
// rescanning. Lines are read only through package logfmt.
//
// Logs need not be in time order: memtrack buffers per thread, so a free can
// appear before the allocation it releases. Matching is by time stamp per
// (process, address); when the log is out of order, Finish re-matches all
// events sorted by time so that the result does not depend on line order.
package analysis
