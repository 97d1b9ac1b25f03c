// Package peak is memtrace's one model of a process's live bytes: the
// current figure, the peak (the highest live bytes over its allocations and
// frees in log order, first reached at the peak time), and, for users that
// want them, the blocks live at the peak by call stack. The agent counts
// with it for --interval snapshots and --report-dir, and the report's model
// (analysis.ReportCosts) for memtrace report and memview, so that the same
// events give the same peak and peak time in all of them.
//
// Live bytes are summed in 128 bits and read out within [0, MaxBytes], so a
// broken log can neither wrap a figure nor make it negative.
package peak
