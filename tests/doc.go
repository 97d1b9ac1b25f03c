// Package tests holds memtrace's end-to-end tests: the C/C++ programs in
// progs/ record what they did (see progs/truth.h), run under memtrace in
// every mode, and the tests compare each log, read through logfmt only,
// with that record exactly.
//
// Run them after `make build progs` (make test does both).
package tests
