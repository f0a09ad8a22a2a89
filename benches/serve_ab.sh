#!/usr/bin/env bash
# Two builds of `tcmon serve` against each other on the 10,000-class tree (benches/big_tree.sh),
# interleaved so the VM's drift hits both alike: for each round and each binary, a fresh
# `tcmon serve --netns NS --dev v0` (1 s poll), scraped every second with gzip as Prometheus
# would be if it scraped that often; over WINDOW seconds it reads the process's page faults
# (minor faults, /proc/PID/stat) and CPU, then the exported poll (from /healthz) and the RSS.
# With BUSY=1, every class carries a packet a second (benches/big_tree.sh's busy_tree).
# Needs root and curl (and python3 with BUSY=1).
#
# Usage: [BUSY=1] benches/serve_ab.sh BIN_A BIN_B [ROUNDS] [WINDOW]     (defaults 2 rounds, 15 s)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
[ $# -ge 2 ] || { echo "usage: benches/serve_ab.sh BIN_A BIN_B [ROUNDS] [WINDOW]" >&2; exit 2; }
A=$1 B=$2 ROUNDS=${3:-2} WINDOW=${4:-15}
[ "$(id -u)" = 0 ] || { echo "SKIPPED serve_ab: needs root"; exit 0; }
NS=tcmon-bench-ab-$$
PORT=29212
pid=
BUSY_PID=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  [ -z "$BUSY_PID" ] || kill "$BUSY_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
big_tree "$NS" 10000 2>/dev/null
[ "${BUSY:-0}" = 0 ] || busy_tree "$NS" 10000
OM='application/openmetrics-text;version=1.0.0'
hz=$(getconf CLK_TCK)

one() {
  local bin=$1 f0 f1 t0 t1 poll rss hwm
  "$bin" serve --netns "$NS" --dev v0 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  sleep 3
  # minflt is field 10, utime and stime 14 and 15 (the command name has no spaces here)
  read -r f0 t0 < <(awk '{print $10, $14 + $15}' "/proc/$pid/stat")
  for ((s = 0; s < WINDOW; s++)); do
    curl -s -o /dev/null --compressed -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics"
    sleep 1
  done
  read -r f1 t1 < <(awk '{print $10, $14 + $15}' "/proc/$pid/stat")
  poll=$(curl -s "http://127.0.0.1:$PORT/healthz" | sed -n 's/.*took \([0-9.]*\) ms.*/\1/p')
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
  hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  awk -v f=$((f1 - f0)) -v d=$((t1 - t0)) -v hz="$hz" -v w="$WINDOW" -v p="$poll" -v r="$rss" -v h="$hwm" \
    'BEGIN {printf "page faults %7d  CPU %.1f%% of a core  last poll %s ms  RSS %s MB, peak %s MB\n", f, d / hz / w * 100, p, r, h}'
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r, A ($A): $(one "$A")"
  echo "round $r, B ($B): $(one "$B")"
done
