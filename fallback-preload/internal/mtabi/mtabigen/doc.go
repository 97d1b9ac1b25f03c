// Command mtabigen writes fallback-preload/abi_gen.go from c/mt_abi.h
// (`go generate` in fallback-preload runs it):
//
//	go run ./internal/mtabi/mtabigen -o abi_gen.go c/mt_abi.h
package main
