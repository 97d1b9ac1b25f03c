// Package procreport owns the per-process report files that
// `memtrace --report-dir DIR` writes when a traced process exits
// (mem_monitor's <process>_<timestamp>.txt and .html) and their
// aggregation by `memtrace report --aggregate DIR`. The text file starts
// with "key: value" lines, which is what Aggregate reads back. Under sudo
// every file and directory is read and created as the user who ran sudo
// (internal/asuser), never as root.
package procreport
