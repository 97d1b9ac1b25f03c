// Package figures is the one definition of what the closing figures of a
// run rest on, for the agent that writes a log and for the readers of it
// (analysis, and through it the report and memview): the figures
// themselves (calls, peak, leaks, suppressed leaks, lost records, how the
// run ended), the leak suppressions (the built-in list, LeakSanitizer's
// leak:PATTERN and how a stack matches one), and the decision of what a
// process's live blocks are when its log ends (leaked, still allocated
// at detach, live at the cut). It is a leaf: the agent counts with it
// without importing analysis, and analysis names its types and functions.
package figures
