// Package report is `memtrace report`: heaptrack_print-style rankings of
// call stacks (most calls, peak consumers, most temporary allocations,
// leaks), a summary block, a comparison of two runs, leak suppressions, and
// exports for other tools (JSON, folded stacks, massif, pprof, one HTML
// file).
//
// It owns no parsing and no analysis: logs are read into package analysis's
// model, whose ReportCosts gives the figures per process and call stack.
// This package names the stacks (symbolically, so that stacks from several
// processes, logs or builds can be added up and compared), ranks them and
// writes them out. docs/report.md is the user's documentation.
package report
