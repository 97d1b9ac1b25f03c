// Package exitreport is a process's figures at its exit (or at the end of
// an attach): what the agent counts for --report-dir and procreport writes
// to the report directory. It is a leaf so that the agent hands a report
// to the runner's sink without importing the writer.
package exitreport
