// Package sizehist is the one bucket definition of the size histogram
// that every view shows (the HTML report, memview): bounds of 1, 2 and 5 ×
// 10^k bytes, the round numbers of the 1000-based unit people read
// (internal/units), and the labels that name them in that unit. One
// definition, so that a bar reads the same wherever it is drawn.
package sizehist
