package ranking

// Measure is what a figure counts of each allocation: one, or its bytes.
type Measure uint8

const (
	Count Measure = iota
	Bytes
)

// Class is which allocations a figure counts.
type Class uint8

const (
	All       Class = iota
	Temporary       // freed by their thread before it allocated again
	AtPeak          // live at their process's peak
	Leaked          // leaks (or, in a run let go, blocks still allocated)
	NumClasses
)

// Merge is how the figures of two sets of allocations make the figure of
// both: stacks into a call site, call sites into an entry, processes into
// the merged section.
type Merge uint8

const (
	Sum Merge = iota
	Max       // a maximum, of bytes only: a count's maximum says nothing
)

// Figure is one figure of a set of allocations. The figures are every
// Measure of every Class added up, then every Class's largest single
// allocation: each view handles each of them, so that a ranking picks one
// and needs nothing else. The summed ones come first, in the order the
// report's figures have always had.
type Figure uint8

const (
	Calls Figure = iota
	AllocatedBytes
	TemporaryCalls
	TemporaryBytes
	PeakCount
	PeakBytes
	Leaks
	LeakedBytes
	LargestBytes
	LargestTemporaryBytes
	LargestPeakBytes
	LargestLeakedBytes
	NumFigures
)

// Measure, Class and Merge say what f is.
func (f Figure) Measure() Measure {
	if f >= LargestBytes {
		return Bytes
	}
	return Measure(f % 2)
}

func (f Figure) Class() Class {
	if f >= LargestBytes {
		return Class(f - LargestBytes)
	}
	return Class(f / 2)
}

func (f Figure) Merge() Merge {
	if f >= LargestBytes {
		return Max
	}
	return Sum
}

// Of is the figure that counts m of class c merged by g.
func Of(m Measure, c Class, g Merge) Figure {
	if g == Max {
		return LargestBytes + Figure(c)
	}
	return Figure(c)*2 + Figure(m)
}

// Name is f's key in the JSON report and its placeholder in a ranking's
// wording ({peak_bytes}).
func (f Figure) Name() string {
	if f >= NumFigures {
		return ""
	}
	return figureNames[f]
}

var figureNames = [NumFigures]string{
	Calls: "calls", AllocatedBytes: "allocated_bytes", TemporaryCalls: "temporary", TemporaryBytes: "temporary_bytes",
	PeakCount: "peak_count", PeakBytes: "peak_bytes", Leaks: "leaks", LeakedBytes: "leaked_bytes",
	LargestBytes: "largest_bytes", LargestTemporaryBytes: "largest_temporary_bytes",
	LargestPeakBytes: "largest_peak_bytes", LargestLeakedBytes: "largest_leaked_bytes",
}

// Entry is what every ranking entry shows whatever its ranking (the HTML
// table's columns, the JSON entry's figures): the summed ones. A ranking
// by another figure shows that one too.
func (f Figure) Entry() bool { return f < LargestBytes }

// Ranking is one ranking of the report: its one row, which the text, the
// JSON, the HTML page, the command line, --help, the man page and the
// completions all read.
type Ranking struct {
	// Flag is the long option that switches it (--print-peaks); Short its
	// one letter, if any.
	Flag, Short string
	// Help is the option's line, without its default.
	Help string
	// On: shown unless switched off.
	On bool
	// Key is its key under the JSON report's "rankings".
	Key string
	// Title heads it in the text, HTMLTitle in the HTML page.
	Title, HTMLTitle string
	// Figure is what it ranks by, Tie what breaks equal costs (a summed
	// figure: the other one on the entry's line).
	Figure, Tie Figure
	// Column names Figure's column in the HTML table when it is not one
	// of every entry's (Figure.Entry).
	Column string
	// Head is the text line above a merged entry, Sub the one above each
	// of its stacks: {NAME} is the figure of that Name, {cost} the
	// ranking's Figure, {share} " (x%)" of the cost over the calls
	// (nothing in a comparison).
	Head, Sub string
	// AllCalls: the head's {calls} is every stack's of the entry's
	// function, those without a cost too (heaptrack_print's "of N
	// allocations in total").
	AllCalls bool
}

// Rankings are the report's rankings in the order they are printed. A
// new one is a row here; ranking_test.go and the report's tests check
// that every view shows it.
var Rankings = []Ranking{
	{
		Flag: "print-allocators", Short: "a", Help: "most calls to allocation functions", On: true,
		Key: "calls", Title: "MOST CALLS TO ALLOCATION FUNCTIONS", HTMLTitle: "Most calls to allocation functions",
		Figure: Calls, Tie: AllocatedBytes,
		Head: "{calls} calls to allocation functions with {peak_bytes} peak consumption from",
		Sub:  "{calls} calls with {peak_bytes} peak consumption from:",
	},
	{
		Flag: "print-peaks", Short: "p", Help: "peak memory consumers: live at the peak", On: true,
		Key: "peak", Title: "PEAK MEMORY CONSUMERS", HTMLTitle: "Peak memory consumers (live at the peak)",
		Figure: PeakBytes, Tie: Calls,
		Head: "{cost} peak memory consumed over {calls} calls from",
		Sub:  "{cost} consumed over {calls} calls from:",
	},
	{
		Flag: "print-leaks", Short: "l", Help: "memory leaks", On: true,
		Key: "leaks", Title: "MEMORY LEAKS", HTMLTitle: "Memory leaks",
		Figure: LeakedBytes, Tie: Calls,
		Head: "{cost} leaked over {calls} calls from",
		Sub:  "{cost} leaked over {calls} calls from:",
	},
	{
		Flag: "print-temporary", Short: "T", Help: "most temporary allocations", On: true,
		Key: "temporary", Title: "MOST TEMPORARY ALLOCATIONS", HTMLTitle: "Most temporary allocations",
		Figure: TemporaryCalls, Tie: AllocatedBytes, AllCalls: true,
		Head: "{cost} temporary allocations of {calls} allocations in total{share} from",
		Sub:  "{cost} temporary allocations of {calls} allocations in total{share} from:",
	},
	{
		Flag: "print-largest", Help: "largest single allocations: each call stack's largest block",
		Key: "largest", Title: "LARGEST SINGLE ALLOCATIONS", HTMLTitle: "Largest single allocations",
		Figure: LargestBytes, Tie: Calls, Column: "largest",
		Head: "{cost} largest single allocation over {calls} calls from",
		Sub:  "{cost} largest over {calls} calls from:",
	},
}

// FlameCosts are --cost's values (heaptrack's --flamegraph-cost-type),
// in the order --help lists them, and the figure each counts: the folded
// stacks' and the HTML flame graph's. Only summed figures: a flame graph
// adds up its stacks' values.
// Title names it in the HTML page.
var FlameCosts = []struct {
	Name   string
	Figure Figure
	Title  string
}{
	{"allocations", Calls, "calls to allocation functions"},
	{"temporary", TemporaryCalls, "temporary allocations"},
	{"leaked", LeakedBytes, "leaked bytes"},
	{"peak", PeakBytes, "bytes live at the peak"},
}
