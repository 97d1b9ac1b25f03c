package preload

// The binary mode's ABI with the library (the shared region's header,
// chunks and records, the frames' layout) is c/mt_abi.h; its op numbers
// are generated from internal/ops into c/mt_ops.h. The header's numbers
// reach Go only through abi_gen.go, which internal/mtabi generates from
// it and nobody edits; abi_test.go fails when the file is stale, when
// EXIT or a record op is among the call ops, and when a compiler (native,
// arm64, 32-bit ARM) lays a structure out other than the generator
// computed. After changing the header:
//
//	go generate ./fallback-preload
//
//go:generate go run ./internal/mtabi/mtabigen -o abi_gen.go c/mt_abi.h
