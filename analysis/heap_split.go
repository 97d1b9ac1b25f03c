package analysis

// The report's figures split between the malloc family and mappings
// (mmap, mremap; anonymous ones unless traced with --mmap-files), so that
// a comparison with a tracer of the heap alone (heaptrack) is explained by
// the report itself.

// Heap is the figures of the malloc family's blocks: pc's less its
// mappings'. Its PeakBytes is theirs live at the process's peak, not the
// malloc family's own peak (HeapPeak).
func (pc *ProcCosts) Heap() CostFigures { return pc.CostFigures.Minus(&pc.Mmap) }

// Minus is c less a part o of it, figure by figure, none below zero (c
// may have lost some of o since: the report's suppressed leaks).
func (c CostFigures) Minus(o *CostFigures) CostFigures {
	c.Calls -= min(c.Calls, o.Calls)
	c.Bytes -= min(c.Bytes, o.Bytes)
	c.Temporary -= min(c.Temporary, o.Temporary)
	c.TempBytes -= min(c.TempBytes, o.TempBytes)
	c.PeakCount -= min(c.PeakCount, o.PeakCount)
	c.PeakBytes -= min(c.PeakBytes, o.PeakBytes)
	c.Leaks -= min(c.Leaks, o.Leaks)
	c.LeakedBytes -= min(c.LeakedBytes, o.LeakedBytes)
	c.Unknown -= min(c.Unknown, o.Unknown)
	c.UnknownBytes -= min(c.UnknownBytes, o.UnknownBytes)
	// A maximum cannot be taken apart: the part's largest is not known.
	c.Largest = [len(c.Largest)]uint64{}
	return c
}
