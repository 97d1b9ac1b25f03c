// Package cli holds what memtrace's three commands (memtrace, memview,
// memtrace report) share on their command lines: the version and the help
// layout, GNU style: --long options, single-letter ones as -x, a short alias
// on its long option's line.
package cli
