// Package asusertest plants, for the tests of every package that creates
// an output file, the symbolic link another user would plant where root
// writes (docs/cli.md, "Output files"), and checks that what it points at
// was left alone.
package asusertest
