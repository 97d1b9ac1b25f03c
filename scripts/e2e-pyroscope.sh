#!/usr/bin/env bash
# e2e-pyroscope.sh (make e2e-pyroscope): Grafana Pyroscope ingests the
# profiles memtrace --http serves while tracing tests/progs/build/liveleak
# (50 blocks of 1000 bytes from leak_here, 10 of 300 from keep_small, live
# until it reads stdin), and what it stored is checked through its query
# API (connect JSON over HTTP), as e2e-parca.sh checks Parca's:
#   - every push's inuse_space is the program's live bytes, and its
#     alloc_space memtrace's allocated bytes (a snapshot: no delta is
#     taken of it), selected by the string label pid,
#   - the merged flame graph of the last push gives leak_here and
#     keep_small their bytes.
# Pyroscope 1.x has no scraper of its own (Grafana Alloy scrapes for it):
# the script fetches /debug/pprof/heap and POSTs it to /ingest
# (format=pprof), which is what a scraper does.
# Pyroscope is built once into $E2E_CACHE from the Go module proxy (the
# module) and from the git tag (its api/ directory: a nested module the
# module's zip leaves out and that it replaces by ./api, at no version the
# proxy serves). PYROSCOPE_GIT is a git repository of Pyroscope, a local
# directory or a URL (default GitHub's). Not part of make test. Needs root
# (eBPF) and make build progs. MEMTRACE=PATH runs another build. Figures
# go to stdout; exit 1 on a mismatch.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYROSCOPE_VERSION=${PYROSCOPE_VERSION:-v1.4.0}
PYROSCOPE_GIT=${PYROSCOPE_GIT:-https://github.com/grafana/pyroscope}
CACHE=${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memtrace-e2e}
PYROSCOPE=$CACHE/pyroscope-$PYROSCOPE_VERSION/pyroscope
PUSHES=${PUSHES:-3}     # profiles pushed and checked
INTERVAL=${INTERVAL:-2} # seconds between pushes (one a step of the series)
MEMTRACE=${MEMTRACE:-$ROOT/bin/memtrace}
PROG=$ROOT/tests/progs/build/liveleak
E2E=e2e-pyroscope
# shellcheck source=e2e-lib.sh
. "$ROOT/scripts/e2e-lib.sh"

e2e_need go git curl jq python3 mkfifo

# The module from the proxy (go mod download: the version alone, no
# version list), its api/ from the tag; built in a copy, without the
# go.work that names ./ebpf too. -checklinkname=0: its dependencies link
# to runtime internals that Go 1.23+ refuses by default.
if [ ! -x "$PYROSCOPE" ]; then
	say "building Pyroscope $PYROSCOPE_VERSION into $PYROSCOPE (once)"
	dir=$(cd /tmp && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "github.com/grafana/pyroscope@$PYROSCOPE_VERSION" | jq -r .Dir)
	[ -d "$dir" ] || die "go mod download github.com/grafana/pyroscope@$PYROSCOPE_VERSION failed"
	src=$(dirname "$PYROSCOPE")/src
	rm -rf "$src"
	mkdir -p "$(dirname "$src")"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	rm -f "$src/go.work" "$src/go.work.sum"
	if [ -d "$PYROSCOPE_GIT" ]; then
		git -C "$PYROSCOPE_GIT" archive "$PYROSCOPE_VERSION" api | tar -x -C "$src"
		[ -f "$src/api/go.mod" ] || die "no api/ at $PYROSCOPE_VERSION in $PYROSCOPE_GIT"
	else
		clone=$(dirname "$src")/git
		rm -rf "$clone"
		git clone -q --depth 1 --branch "$PYROSCOPE_VERSION" --filter=blob:none --sparse "$PYROSCOPE_GIT" "$clone" &&
			git -C "$clone" sparse-checkout set api || die "cloning $PYROSCOPE_GIT at $PYROSCOPE_VERSION failed (PYROSCOPE_GIT=DIR takes a local repository)"
		cp -r "$clone/api" "$src/api"
		rm -rf "$clone"
	fi
	(cd "$src" && GOWORK=off GOFLAGS=-mod=mod go build -ldflags=-checklinkname=0 -o "$PYROSCOPE.tmp" ./cmd/pyroscope) ||
		die "building Pyroscope failed"
	mv "$PYROSCOPE.tmp" "$PYROSCOPE"
	rm -rf "$src"
fi

e2e_start
PPORT=$(freeport)
GPORT=$(freeport)
LPORT=$(freeport)

mkdir -p "$W/data"
(cd "$W" && exec "$PYROSCOPE" -server.http-listen-port="$PPORT" -server.grpc-listen-port="$GPORT" \
	-memberlist.bind-port="$LPORT" -pyroscopedb.data-path="$W/data" -self-profiling.disable-push=true \
	-usage-stats.enabled=false -log.level=warn >"$W/pyroscope.log" 2>&1) &
pids+=($!)
API=http://127.0.0.1:$PPORT
for _ in $(seq 60); do
	[ "$(curl -s "$API/ready" || true)" = ready ] && break
	sleep 1
done
[ "$(curl -s "$API/ready" || true)" = ready ] || die "Pyroscope was not ready in a minute; its log:
$(tail -20 "$W/pyroscope.log")"

start=$(date +%s)
for k in $(seq "$PUSHES"); do
	[ "$k" = 1 ] || sleep "$INTERVAL"
	curl -sf -o "$W/heap.pb.gz" "http://127.0.0.1:$MPORT/debug/pprof/heap" || die "memtrace's endpoint did not answer"
	now=$(date +%s)
	code=$(curl -s -o "$W/ingest.out" -w '%{http_code}' -X POST --data-binary "@$W/heap.pb.gz" \
		"$API/ingest?name=memtrace-e2e&format=pprof&spyName=memtrace&from=$now&until=$now")
	[ "$code" = 200 ] || die "Pyroscope's /ingest answered $code: $(cat "$W/ingest.out")"
done
end=$(($(date +%s) + 5))

# query METHOD JSON: Pyroscope's QuerierService, connect's JSON form.
query() {
	curl -sf -X POST -H 'Content-Type: application/json' -d "$2" "$API/querier.v1.QuerierService/$1"
}
series() { # TYPE SELECTOR: the points' values, then their timestamps
	query SelectSeries "$(jq -nc --arg t "$1" --arg q "$2" --argjson s $((start * 1000 - 1000)) --argjson e $((end * 1000)) \
		'{profileTypeID:$t, labelSelector:$q, start:$s, end:$e, step:1}')"
}
INUSE='memory:inuse_space:bytes:space:bytes'
ALLOC='memory:alloc_space:bytes:space:bytes'
SEL="{service_name=\"memtrace-e2e\",pid=\"$prog_pid\"}"
n=0
for _ in $(seq 30); do
	series "$INUSE" "$SEL" >"$W/inuse.json" 2>/dev/null || {
		sleep 1
		continue
	}
	n=$(jq '[.series[]?.points[]?] | length' "$W/inuse.json")
	[ "$n" -ge "$PUSHES" ] && break
	sleep 1
done
[ "$n" -ge "$PUSHES" ] || die "Pyroscope stored $n of $PUSHES pushes of pid $prog_pid; its log:
$(tail -20 "$W/pyroscope.log")"
series "$ALLOC" "$SEL" >"$W/alloc.json" || die "Pyroscope's SelectSeries failed"

# 1. The types Pyroscope knows from the pushes.
query ProfileTypes '{}' >"$W/types.json" || die "Pyroscope's ProfileTypes failed"
check "memory:inuse_space stored" "$(jq "[.profileTypes[] | select(.ID==\"$INUSE\")] | length" "$W/types.json")" 1

# 2. Every push's bytes, selected by the pid label: the program's.
vals=$(jq -r '[.series[].points[].value] | map(tostring) | join(" ")' "$W/inuse.json")
say "SelectSeries $INUSE$SEL: $vals"
for v in $vals; do
	check "push's inuse_space (memtrace says $inuse_bytes)" "$v" "$inuse_bytes"
done
vals=$(jq -r '[.series[].points[].value] | map(tostring) | join(" ")' "$W/alloc.json")
say "SelectSeries $ALLOC$SEL: $vals"
for v in $vals; do
	check "push's alloc_space, not a delta (memtrace says $alloc_bytes)" "$v" "$alloc_bytes"
done
check "memtrace's in-use bytes cover the program's leaks" "$((inuse_bytes >= WANT_LEAK + WANT_SMALL))" 1

# 3. The flame graph of the last push alone (a point is a step of a
# second, stamped at one of its ends; pushes are INTERVAL apart):
# leak_here and keep_small.
ts=$(jq -r '[.series[].points[].timestamp | tonumber] | max' "$W/inuse.json")
query SelectMergeStacktraces "$(jq -nc --arg t "$INUSE" --arg q "$SEL" --argjson s $((ts - 1000)) --argjson e $((ts + 999)) \
	'{profileTypeID:$t, labelSelector:$q, start:$s, end:$e}')" >"$W/flame.json" || die "Pyroscope's SelectMergeStacktraces failed"
[ "$(jq -r '.flamegraph.total // empty' "$W/flame.json")" != "" ] || die "no profile of pid $prog_pid in Pyroscope at $ts ms: $(head -c 300 "$W/flame.json")"
# Each level's values are (offset, total, self, name index) quadruples.
self() {
	jq -r --arg f "$1" '.flamegraph as $g | [$g.levels[].values | . as $v | range(0; length; 4) | select($g.names[$v[.+3] | tonumber] == $f) | $v[.+2] | tonumber] | add // 0' "$W/flame.json"
}
check "flame graph: leak_here self bytes" "$(self leak_here)" "$WANT_LEAK"
check "flame graph: keep_small self bytes" "$(self keep_small)" "$WANT_SMALL"
check "flame graph: total" "$(jq -r '.flamegraph.total' "$W/flame.json")" "$inuse_bytes"
# The pid label selects: another pid has nothing.
other=$(series "$INUSE" '{service_name="memtrace-e2e",pid="1"}' | jq '[.series[]?.points[]?] | length' || echo 0)
check "pushes selected by pid=\"1\"" "${other:-0}" 0

[ "$fail" = 0 ] || die "Pyroscope $PYROSCOPE_VERSION does not store what memtrace served (KEEP=1 keeps $W)"
say "Pyroscope $PYROSCOPE_VERSION stored what memtrace served"
