#!/usr/bin/env bash
# Leave-on profiling of a fleet (--comm; docs/fleet.md, "Cost"): N
# processes of one program under `memtrace --comm NAME --sample 512K
# --stack-depth 32 -o none --http`:
#   1. start-up: memtrace's start to tracing (memtrace_traced_since_seconds
#      on /metrics), with no NAME process running, then with N running
#      (each attached to at the start);
#   2. each of N processes started after memtrace: its exec (the fork and
#      exec of Popen) to its pid on /metrics, median and worst;
#   3. links (bpf_link descriptors), probe sets, memtrace's RSS and open
#      descriptors with N traced, and its own CPU while they idle;
#   4. an untraced process of another name, the same program file's bytes
#      and libc, beside them: its malloc(64)+free loop, ns per pair, without
#      memtrace and with memtrace and the N processes running (rounds
#      interleaved, medians).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-50}
ROUNDS=${ROUNDS:-5}
LOOP=${LOOP:-2000000}
MT=$PWD/bin/memtrace
[ -x "$MT" ] && [ -x tests/progs/build/fleet ] || { echo "bench-fleet: build first (make build progs)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-fleet: needs root for BPF" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp tests/progs/build/fleet "$tmp/mtbenchfleet"
cp tests/progs/build/fleet "$tmp/mtbenchother"
export MT N ROUNDS LOOP TMPD="$tmp"
python3 - <<'PY'
import os, re, signal, statistics, subprocess, time, urllib.request
MT, N, ROUNDS, LOOP, T = os.environ["MT"], int(os.environ["N"]), int(os.environ["ROUNDS"]), os.environ["LOOP"], os.environ["TMPD"]
fleet, other = T + "/mtbenchfleet", T + "/mtbenchother"
ARGS = ["--comm", "mtbenchfleet", "--sample", "512K", "--stack-depth", "32", "-o", "none", "--http", "127.0.0.1:0"]

def metrics(addr):
    return urllib.request.urlopen("http://" + addr + "/metrics", timeout=5).read().decode()

def value(text, name):
    m = re.search(r"(?m)^" + name + r" (\S+)$", text)
    return float(m.group(1)) if m else None

def start_memtrace():
    t0 = time.monotonic()
    err = open(T + "/mt.err", "w+")
    p = subprocess.Popen([MT] + ARGS, stderr=err)
    addr = None
    while True:
        if p.poll() is not None:
            raise SystemExit("memtrace ended: " + open(T + "/mt.err").read())
        if addr is None:
            m = re.search(r"serving http://([^/]+)/", open(T + "/mt.err").read())
            addr = m and m.group(1)
        if addr and value(metrics(addr), "memtrace_traced_since_seconds"):
            return p, addr, time.monotonic() - t0
        time.sleep(0.005)

def stop_memtrace(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)

def start_fleet():
    p = subprocess.Popen([fleet], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return p

def stop_fleet(ps):
    for p in ps:
        p.stdin.close()
    for p in ps:
        p.wait(timeout=30)

def loop_ns():
    return float(subprocess.run([other, "loop", LOOP], capture_output=True, text=True, check=True).stdout)

def pids_on(addr):
    return set(int(x) for x in re.findall(r'(?m)^memtrace_live_bytes\{[^}]*pid="(\d+)"', metrics(addr)))

def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def links(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:bpf_link":
                n += 1
        except OSError:
            pass
    return n

# 1. start-up, empty.
ups = []
for _ in range(ROUNDS):
    p, addr, up = start_memtrace()
    ups.append(up)
    stop_memtrace(p)
print("start-up to tracing, no NAME process: median %.0f ms (runs: %s)" % (statistics.median(ups) * 1000, " ".join("%.0f" % (u * 1000) for u in ups)))

# 1b. start-up with N running.
ps = [start_fleet() for _ in range(N)]
for p in ps:
    p.stdout.readline()
p, addr, up = start_memtrace()
print("start-up to tracing, %d NAME processes running (attached at the start): %.0f ms, %d on /metrics" % (N, up * 1000, len(pids_on(addr))))
stop_memtrace(p)
stop_fleet(ps)

# 2, 3. N started after memtrace.
p, addr, _ = start_memtrace()
rss0 = rss_kb(p.pid)
lat, ps = [], []
for _ in range(N):
    t0 = time.monotonic()
    f = start_fleet()
    ps.append(f)
    while f.pid not in pids_on(addr):
        time.sleep(0.002)
    lat.append(time.monotonic() - t0)
for f in ps:
    f.stdout.readline()
text = metrics(addr)
print("exec to /metrics, %d processes started one after another: median %.1f ms, worst %.1f ms" % (N, statistics.median(lat) * 1000, max(lat) * 1000))
print("with %d traced: %d bpf_link descriptors, memtrace_probes_attached %d, open descriptors %d, memtrace RSS %d MiB (%d MiB before them)" % (
    N, links(p.pid), value(text, "memtrace_probes_attached"), len(os.listdir("/proc/%d/fd" % p.pid)), rss_kb(p.pid) // 1024, rss0 // 1024))

def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

c0 = cpu_s(p.pid)
time.sleep(10)
print("memtrace's own CPU with %d idle traced processes (its rescans, every second under a selector): %.1f %% of one CPU" % (N, (cpu_s(p.pid) - c0) * 10))

# 4. the untraced neighbour, rounds interleaved: memtrace and the N stay up
# for the "with" runs; the "without" runs stop nothing (the N processes
# wait on stdin, idle) but are taken before memtrace starts and after it ends.
with_ns = [loop_ns() for _ in range(ROUNDS)]
stop_memtrace(p)
stop_fleet(ps)
without_ns = [loop_ns() for _ in range(ROUNDS)]
print("untraced neighbour, malloc(64)+free: without memtrace median %.1f ns/pair (runs: %s); beside memtrace and %d traced: %.1f ns/pair (runs: %s); ratio %.2f" % (
    statistics.median(without_ns), " ".join("%.1f" % x for x in without_ns), N,
    statistics.median(with_ns), " ".join("%.1f" % x for x in with_ns), statistics.median(with_ns) / statistics.median(without_ns)))
PY
