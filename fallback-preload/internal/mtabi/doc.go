// Package mtabi reads c/mt_abi.h, the ABI between memtrace-preload.so and
// package preload (the binary mode's shared region and its records; the op numbers are
// internal/ops'), and writes the Go constants preload uses (abi_gen.go), so that
// no offset or number is copied by hand. It understands the subset of C the
// header is written in: integer and string #defines and
// typedef'd structs of fixed-width integer fields, laid out as C lays them
// out with natural alignment (which preload's tests check against what each
// compiler really does, read back from DWARF).
package mtabi
