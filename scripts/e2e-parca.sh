#!/usr/bin/env bash
# e2e-parca.sh (make e2e-parca): Parca scrapes memtrace --http tracing
# tests/progs/build/liveleak (50 blocks of 1000 bytes from leak_here, 10 of
# 300 from keep_small, live until it reads stdin) with docs/live.md's scrape
# config, and what Parca stored is checked through its gRPC QueryService:
#   - the memory profile types are not delta (a snapshot has no duration),
#   - every scrape's inuse_space is the program's live bytes, selected by
#     the string label pid,
#   - Parca's top table at a scrape gives leak_here and keep_small their
#     bytes.
# Parca is built once from the Go module proxy into $E2E_CACHE (network the
# first time, then none), with the script's gRPC client (e2e-parca/client.go,
# built inside a copy of Parca's module: v0.21's HTTP gateway answers 404).
# Not part of make test. Needs root (eBPF) and make build progs.
# MEMTRACE=PATH runs another build (an older one fails the checks). Figures
# go to stdout; exit 1 on a mismatch.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PARCA_VERSION=${PARCA_VERSION:-v0.21.0}
CACHE=${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memtrace-e2e}
PARCA=$CACHE/parca-$PARCA_VERSION/parca
CLIENT=$CACHE/parca-$PARCA_VERSION/client
SCRAPES=${SCRAPES:-3}    # scrapes to check
INTERVAL=${INTERVAL:-3s} # Parca's scrape interval
MEMTRACE=${MEMTRACE:-$ROOT/bin/memtrace}
PROG=$ROOT/tests/progs/build/liveleak
E2E=e2e-parca
# shellcheck source=e2e-lib.sh
. "$ROOT/scripts/e2e-lib.sh"

e2e_need go curl jq python3 mkfifo

# Parca from the module proxy. go install PKG@VERSION asks the proxy for the
# module's version list (a deprecation check), which the proxy may refuse;
# go mod download asks for the version alone, then it builds in place.
# -checklinkname=0: Parca's dependencies link to runtime internals that
# Go 1.23+ refuses by default.
moddir() {
	(cd /tmp && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "github.com/parca-dev/parca@$PARCA_VERSION" | jq -r .Dir)
}
if [ ! -x "$PARCA" ]; then
	say "building Parca $PARCA_VERSION into $PARCA (once)"
	dir=$(moddir)
	[ -d "$dir" ] || die "go mod download github.com/parca-dev/parca@$PARCA_VERSION failed"
	mkdir -p "$(dirname "$PARCA")"
	(cd "$dir" && go build -ldflags=-checklinkname=0 -o "$PARCA.tmp" ./cmd/parca) || die "building Parca failed"
	mv "$PARCA.tmp" "$PARCA"
fi
if [ ! -x "$CLIENT" ] || [ "$ROOT/scripts/e2e-parca/client.go" -nt "$CLIENT" ]; then
	say "building the query client into $CLIENT"
	dir=$(moddir)
	src=$(dirname "$CLIENT")/src
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	mkdir -p "$src/cmd/memtrace-e2e-client"
	grep -v '^//go:build ignore$' "$ROOT/scripts/e2e-parca/client.go" >"$src/cmd/memtrace-e2e-client/main.go"
	(cd "$src" && go build -o "$CLIENT" ./cmd/memtrace-e2e-client) || die "building the query client failed"
fi

e2e_start
PPORT=$(freeport)

# docs/live.md's scrape config.
cat >"$W/parca.yaml" <<EOF
object_storage:
  bucket:
    type: "FILESYSTEM"
    config:
      directory: "$W/data"
scrape_configs:
  - job_name: memtrace
    scrape_interval: $INTERVAL
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
    profiling_config:
      pprof_config:
        memory: { enabled: true, path: /debug/pprof/heap, delta: false }
        process_cpu: { enabled: false }
        goroutine: { enabled: false }
        block: { enabled: false }
        mutex: { enabled: false }
EOF
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
(cd "$W" && exec "$PARCA" --config-path="$W/parca.yaml" --http-address="127.0.0.1:$PPORT" \
	--debuginfod-upstream-servers=127.0.0.1:1 --log-level=warn >"$W/parca.log" 2>&1) &
pids+=($!)
GRPC=127.0.0.1:$PPORT
TYPE='memory:inuse_space:bytes:space:bytes'
QUERY="$TYPE{job=\"memtrace\",pid=\"$prog_pid\"}"

# Wait for the type, then for SCRAPES scrapes of the process. Should
# Parca take the profile for a delta (a duration on a snapshot), the
# series is TYPE:delta: read it there, to show what it made of it.
delta=
for _ in $(seq 60); do
	sleep 1
	"$CLIENT" "$GRPC" types >"$W/types.json" 2>"$W/client.err" || continue
	delta=$(jq -r '[.types[]? | select(.name=="memory" and .sampleType=="inuse_space") | (.delta == true | tostring)][0] // empty' "$W/types.json")
	[ -n "$delta" ] && break
done
[ -n "$delta" ] || die "Parca stored no memory profile in a minute: $(cat "$W/client.err"); its log:
$(tail -20 "$W/parca.log")"
[ "$delta" = true ] && QUERY="$TYPE:delta{job=\"memtrace\",pid=\"$prog_pid\"}"
n=0
for _ in $(seq 60); do
	sleep 1
	end=$(date -u -d '+5 sec' +%Y-%m-%dT%H:%M:%SZ)
	"$CLIENT" "$GRPC" range "$QUERY" "$start" "$end" 1s >"$W/range.json" 2>"$W/client.err" || continue
	n=$(jq '[.series[]?.samples[]?] | length' "$W/range.json")
	[ "$n" -ge "$SCRAPES" ] && break
done
[ "$n" -ge "$SCRAPES" ] || die "Parca stored $n scrapes of pid $prog_pid in a minute: $(cat "$W/client.err"); its log:
$(tail -20 "$W/parca.log")"

# 1. The types Parca knows: memory's are snapshots, none a delta.
check "inuse_space type stored as a snapshot (delta false)" \
	"$(jq -r '[.types[] | select(.name=="memory" and .sampleType=="inuse_space")][0].delta // false' "$W/types.json")" false
check "memory types flagged delta" "$(jq '[.types[] | select(.name=="memory" and .delta==true)] | length' "$W/types.json")" 0

# 2. Every scrape's in-use bytes, selected by the pid label: the program's.
vals=$(jq -r '[.series[].samples[].value] | map(tostring) | join(" ")' "$W/range.json")
say "QueryRange $QUERY: $vals"
say "  per second as Parca shows it: $(jq -r '[.series[].samples[].valuePerSecond] | map(tostring) | join(" ")' "$W/range.json")"
for v in $vals; do
	check "scrape's inuse_space (memtrace says $inuse_bytes)" "$v" "$inuse_bytes"
done
check "memtrace's in-use bytes cover the program's leaks" "$((inuse_bytes >= WANT_LEAK + WANT_SMALL))" 1

# 3. Parca's top table at the last scrape: leak_here and keep_small.
ts=$(jq -r '[.series[].samples[].timestamp] | max' "$W/range.json")
"$CLIENT" "$GRPC" top "$QUERY" "$ts" >"$W/top.json" || die "Parca's top query failed"
flat() { jq -r --arg f "$1" '[.top.list[] | select(.meta.function.name==$f) | (.flat|tonumber)] | add // 0' "$W/top.json"; }
check "top: leak_here flat bytes" "$(flat leak_here)" "$WANT_LEAK"
check "top: keep_small flat bytes" "$(flat keep_small)" "$WANT_SMALL"
check "top: total" "$(jq -r '.total' "$W/top.json")" "$inuse_bytes"
# The pid label selects: another pid has nothing.
other=$("$CLIENT" "$GRPC" range "$TYPE{job=\"memtrace\",pid=\"1\"}" "$start" "$(date -u -d '+5 sec' +%Y-%m-%dT%H:%M:%SZ)" 1s 2>/dev/null |
	jq '[.series[]?.samples[]?] | length' || echo 0)
check "scrapes selected by pid=\"1\"" "${other:-0}" 0

[ "$fail" = 0 ] || die "Parca $PARCA_VERSION does not store what memtrace served (KEEP=1 keeps $W)"
say "Parca $PARCA_VERSION stored what memtrace served"
