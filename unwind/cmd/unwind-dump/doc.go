// Command unwind-dump builds the unwind table of ELF files and prints its
// size, build time and statistics, and with -rows every row, or with
// -at ADDR the rule at an ELF virtual address.
//
//	go run ./unwind/cmd/unwind-dump [-rows] [-at 0xADDR] FILE...
package main
