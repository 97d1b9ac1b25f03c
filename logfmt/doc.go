// Package logfmt is the one place where memtrace's log format is written and
// read. The format is memtrack's (docs/spec.md §2): every memtrack log is a
// memtrace log and every memtrace log opens in memtrack's own memview.
// Anything memtrace adds lives on lines that start with "[memtrace] ", which
// memtrack's readers ignore. Each of those lines has one typed writer here
// (AppendHeader, AppendThread, AppendProc, AppendLost, AppendSummary,
// AppendSnapshot*, AppendStack, AppendFD) beside the parser that reads it
// back, so that both tracers write one layout and no caller builds a line
// from loose keys.
//
// The writer formats without fmt so that the agent can keep up with the
// kernel; the parser works on byte slices and allocates nothing per event so
// that readers can load logs of millions of events.
package logfmt
