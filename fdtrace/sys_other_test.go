//go:build !amd64

package fdtrace

const sysDup2 = 0 // arm64 has only dup3
