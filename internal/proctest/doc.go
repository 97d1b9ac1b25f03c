// Package proctest starts processes whose /proc entries are hard to read
// right, for the tests of every package that reads /proc (internal/procfs
// and its users), so that each checks its reader against the same case.
package proctest
