package preload

// The binary mode's ABI with the library (the shared region's header,
// chunks and records, the op numbers, the frames' layout) is
// c/mt_abi.h. Its numbers reach Go only through abi_gen.go, which
// internal/mtabi generates from the header and nobody edits; abi_test.go
// fails when the file is stale, when an op's number is not logfmt's, and
// when a compiler (native, arm64, 32-bit ARM) lays a structure out other
// than the generator computed. After changing the header:
//
//	go generate ./fallback-preload
//
//go:generate go run ./internal/mtabi/mtabigen -o abi_gen.go c/mt_abi.h
