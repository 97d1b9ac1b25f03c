// Package unwindtest builds the binaries whose unwind information the
// tests of more than one package need, so that each checks its reader
// against the same case.
package unwindtest
