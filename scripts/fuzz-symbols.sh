#!/bin/sh
# Fuzz the symbols package's parsers: ELF symbol loading, the DWARF line
# lookup path and /proc/PID/maps parsing. FUZZTIME per target (default 60s).
# Crashers are written to symbols/testdata/fuzz/<Target>/ and then replayed by
# every `go test ./symbols`. Minimization is capped at 200 runs: the seeds are
# whole binaries, and minimizing each new input for 60s starves the search.
set -eu
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
for target in FuzzELFSymbols FuzzDWARFLine FuzzParseMaps; do
	echo "== $target ($FUZZTIME)"
	go test ./symbols -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 200x
done
