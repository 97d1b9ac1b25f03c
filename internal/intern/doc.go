// Package intern holds the readers' interning tables of many small keys:
// sequences of uint32 ids (a log's call stacks as frame ids, the report's
// sites as frame names) and strings (the report's frame names). Each key is
// stored once, back to back in one slice or in arena chunks, and found
// again through an open-addressing table of hash tags and ids: no key of
// its own per entry, no map entry, no pointer for the collector to mark. A
// log of a million distinct stacks made maps keyed by strings most of a
// reader's heap (docs/report.md, "Memory").
package intern
