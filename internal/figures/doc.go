// Package figures holds the closing figures of a run (calls, peak, leaks,
// suppressed leaks, lost records, how the run ended), which the agent
// computes as it writes a log and the report computes from the log, so
// that neither package imports the other.
package figures
