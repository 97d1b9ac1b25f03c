# memtrace build. `make build` needs only Go and gcc: the BPF objects are
# generated and committed (make generate needs clang-19 and libbpf-dev).
GO      ?= go
CC      ?= gcc
CLANG   ?= clang-19
BIN     := bin
# -trimpath keeps the checkout's directory out of every Go build, so that
# Go's caches (builds, test results, vet, staticcheck) serve any clone of
# the same sources: without it they key each package on its directory,
# and a fresh clone (CI's) compiled and analysed everything again.
GOFLAGS ?=
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))
export CGO_ENABLED ?= 0

# make install: GNU's PREFIX and DESTDIR. memtrace finds its preload
# library in PREFIX/lib/memtrace/, beside PREFIX/bin (fallback-preload's
# Library).
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL ?= install
bindir  := $(DESTDIR)$(PREFIX)/bin
libdir  := $(DESTDIR)$(PREFIX)/lib/memtrace
man1dir := $(DESTDIR)$(PREFIX)/share/man/man1
bashdir := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
zshdir  := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
fishdir := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
# The topic documents the man pages name (internal/cli's DocDir).
docdir  := $(DESTDIR)$(PREFIX)/share/doc/memtrace

DEBIAN_PACKAGES := golang-any gcc g++ make libc6-dev musl-tools binutils util-linux clang-19 llvm-19 clang-format-19 libbpf-dev bpftool \
	gcc-aarch64-linux-gnu g++-aarch64-linux-gnu gcc-arm-linux-gnueabihf g++-arm-linux-gnueabihf \
	libc6-dev-arm64-cross libc6-dev-armhf-cross qemu-user heaptrack valgrind tmux chromium \
	linux-libc-dev libc6-dbg sqlite3 python3.11 zstd libjemalloc2 rustc libtcmalloc-minimal4 libmimalloc2.0 \
	libc++-19-dev libc++abi-19-dev groff zsh fish \
	qemu-system-x86 qemu-system-arm busybox-static kmod gdb

.PHONY: all build deps demo test check bench soak generate check-generated cross fuzz clean progs lint install uninstall docs kernels e2e-parca e2e-pyroscope

all: build

# deps installs every Debian package the project and its tests use.
deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(filter-out golang-any,$(DEBIAN_PACKAGES)) >/dev/null
	./scripts/kernels/fetch.sh

build: $(BIN)/memtrace $(BIN)/memview $(BIN)/memtrace-preload.so

$(BIN)/memtrace: $(BIN)/memtrace-preload.so FORCE
	$(GO) build -o $@ ./cmd/memtrace

$(BIN)/memview: FORCE
	$(GO) build -o $@ ./cmd/memview

$(BIN)/memtrace-preload.so: FORCE
	$(MAKE) -s -C fallback-preload OUT=$(abspath $@)

progs:
	$(MAKE) -s -C tests/progs

# install: the two commands, the preload library, the man pages, the
# topic documents they name and the bash, zsh and fish completions
# (docs/cli.md).
install: build
	$(INSTALL) -d $(bindir) $(libdir) $(man1dir) $(bashdir) $(zshdir) $(fishdir) $(docdir)
	$(INSTALL) -m 755 $(BIN)/memtrace $(BIN)/memview $(bindir)/
	$(INSTALL) -m 644 $(BIN)/memtrace-preload.so $(libdir)/
	$(INSTALL) -m 644 docs/man/memtrace.1 docs/man/memview.1 docs/man/memtrace-report.1 $(man1dir)/
	$(INSTALL) -m 644 docs/*.md $(docdir)/
	$(INSTALL) -m 644 completions/memtrace.bash $(bashdir)/memtrace
	$(INSTALL) -m 644 completions/memview.bash $(bashdir)/memview
	$(INSTALL) -m 644 completions/_memtrace completions/_memview $(zshdir)/
	$(INSTALL) -m 644 completions/memtrace.fish completions/memview.fish $(fishdir)/

uninstall:
	rm -f $(bindir)/memtrace $(bindir)/memview $(libdir)/memtrace-preload.so
	-rmdir $(libdir)
	rm -f $(man1dir)/memtrace.1 $(man1dir)/memview.1 $(man1dir)/memtrace-report.1
	rm -f $(bashdir)/memtrace $(bashdir)/memview $(zshdir)/_memtrace $(zshdir)/_memview
	rm -f $(fishdir)/memtrace.fish $(fishdir)/memview.fish
	rm -f $(addprefix $(docdir)/,$(notdir $(wildcard docs/*.md)))
	-rmdir $(docdir)

# docs: the man pages (docs/man) and completions (completions/) from the
# command tables in internal/cli; TestGeneratedFresh checks them.
docs:
	$(GO) generate ./internal/cli

# e2e-parca: Parca (built once from the Go module proxy into
# ~/.cache/memtrace-e2e) scrapes --http tracing liveleak; what it stores is
# checked through its query API (scripts/e2e-parca.sh, docs/live.md). Not
# part of test: the first run needs the network. Needs root.
e2e-parca: build progs
	./scripts/e2e-parca.sh

# e2e-pyroscope: Pyroscope v1.4.0 (built once into ~/.cache/memtrace-e2e
# from the module proxy and the git tag's api/) ingests --http's profiles
# of liveleak; what it stores is checked through its query API
# (scripts/e2e-pyroscope.sh, docs/live.md). Not part of test. Needs root.
e2e-pyroscope: build progs
	./scripts/e2e-pyroscope.sh

FORCE:

demo: build progs
	./scripts/demo.sh

# MEMTRACE_REQUIRE_BPF=1 (set by .ci/run) turns every "BPF unavailable" skip
# into a failure. The cross builds are part of it: a change that breaks an
# ARM build fails here, not on a user's board. Every test in full, through
# make check's queue (CHECK_FULL=1: no -short, no cached result; the tests
# package one test per process beside the other packages), which takes
# about half of one serial `go test -count=1 ./...` on 2 vCPUs.
test: build progs lint cross
	./scripts/check-generated.sh
	CHECK_FULL=1 GO=$(GO) ./scripts/check.sh
	GO=$(GO) ./scripts/kernels/matrix.sh

# kernels: the kernel matrix (docs/kernels.md): the eBPF checks on this
# machine's kernel and on Debian's 5.10, 6.1 and 6.12 booted under QEMU,
# a table of results and times; fails when a check that
# scripts/kernels/expect requires fails.
kernels: build progs
	GO=$(GO) ./scripts/kernels/matrix.sh

# check is the fast inner loop: lint (beside the tests, CHECK_LINT=1) and
# every package's tests with -short,
# which skips the soak, the fault loops, the cross builds under qemu,
# Chromium and tmux and runs each race loop once; the tests package runs
# one test per process from a longest-first queue beside the others
# (scripts/check.sh). make test stays the whole run (and CI's).
check: build progs
	CHECK_LINT=1 GO=$(GO) ./scripts/check.sh

# lint: gofmt, goimports' import groups, clang-format for the C, a tidy
# go.mod, go vet for every architecture memtrace ships for, and staticcheck
# (goimports and staticcheck pinned in go.mod as tools).
lint:
	./scripts/lint.sh

# bench: BENCH="preload bpf" runs only those drivers (scripts/bench-NAME.sh).
bench: build progs
	BENCH="$(BENCH)" ./scripts/bench.sh

# soak: the fault loops of make test (TestFaultRounds) at 200 rounds per
# scenario (ROUNDS=N to change), with per-scenario counts of rounds that
# left a process stopped or BPF objects behind.
soak: build progs
	GO=$(GO) ./scripts/soak.sh

generate:
	$(GO) generate ./...

# check-generated regenerates the BPF objects, the op lists of internal/ops
# and the other generated files and fails if they differ from the committed
# ones.
check-generated:
	./scripts/check-generated.sh

cross:
	./scripts/cross.sh

fuzz:
	./scripts/fuzz.sh

clean:
	rm -rf $(BIN)
	$(MAKE) -s -C tests/progs clean || true
	$(MAKE) -s -C fallback-preload clean || true
