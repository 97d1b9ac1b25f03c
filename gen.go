package memtrace

//go:generate go tool bpf2go -cc clang-19 -target amd64,arm64 -go-package tracer -output-dir tracer -output-stem memtrace Memtrace bpf/memtrace.bpf.c -- -I bpf/include -I bpf -O2 -g -Wall -Werror -mcpu=v3
//go:generate go tool bpf2go -cc clang-19 -target amd64,arm64 -go-package tracer -output-dir tracer -output-stem memtrace_compat MemtraceCompat bpf/memtrace.bpf.c -- -I bpf/include -I bpf -O2 -g -Wall -Werror -mcpu=v3 -DMT_COMPAT
//go:generate go tool bpf2go -cc clang-19 -target amd64,arm64 -go-package fdtrace -output-dir fdtrace -output-stem fdtrack Fdtrack bpf/fdtrack.bpf.c -- -I bpf/include -I bpf -O2 -g -Wall -Werror -mcpu=v3
//go:generate go tool bpf2go -cc clang-19 -target amd64,arm64 -go-package fdtrace -output-dir fdtrace -output-stem fdtrack_compat FdtrackCompat bpf/fdtrack.bpf.c -- -I bpf/include -I bpf -O2 -g -Wall -Werror -mcpu=v3 -DMT_COMPAT
