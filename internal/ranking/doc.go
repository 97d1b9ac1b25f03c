// Package ranking is the one table of the report's rankings (Rankings):
// each row is everything about one ranking (its option and help, titles,
// wording, JSON key, the figure it ranks by and how that figure merges),
// and the text report, the JSON, the HTML page, the command line, --help,
// the man page and the completions all read it, so that a new ranking is
// a row here and nothing else. The figures a row may pick (Figure) are
// the analysis model's (analysis.CostFigures.Figure), every one of them
// handled by every view; FlameCosts are --cost's values. It imports
// nothing, so that internal/cli can read it.
package ranking
