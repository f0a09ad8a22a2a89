#!/usr/bin/env bash
# Benchmark of `tcmon serve` on a big tree (issue: tcmon serve).
#
# Builds 10,000 HTB classes, each with a pfifo leaf, on a veth in a throwaway namespace (as
# benches/dump_10k.sh does), starts `tcmon serve --netns NS --dev v0` (1 s poll) and, in the
# same run on the same tree, node_exporter with only its qdisc collector (Debian
# prometheus-node-exporter; it reports root qdiscs only: one series set per device). Then:
#   - /metrics response time over SCRAPES scrapes, median and p99, for
#       tcmon  OpenMetrics (what Prometheus asks for), back to back (mostly cached renderings)
#       tcmon  OpenMetrics, one scrape after each poll (every scrape renders: Prometheus's case)
#       tcmon  text 0.0.4, back to back
#       node_exporter --collector.qdisc, back to back
#   - tcmon's CPU over CPU_S seconds at the 1 s poll, scraped every 15 s as Prometheus would,
#     and its RSS (current and peak); then scraped every second.
#   - the agent's poll as it exports it against the raw dumps (the kernel's floor), back to
#     back and 1 s apart.
#   - then with every class carrying a packet a second (busy_tree): CPU and /metrics size with
#     the default groups and with class_sojourn added.
# Needs root, curl, python3 and prometheus-node-exporter.
#
# Usage: benches/serve_10k.sh [CLASSES] [SCRAPES] [CPU_S]     (defaults 10000, 100, 60)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-10000}
SCRAPES=${2:-100}
CPU_S=${3:-60}
[ "$(id -u)" = 0 ] || { echo "SKIPPED serve_10k: needs root"; exit 0; }
command -v prometheus-node-exporter >/dev/null || { echo "install prometheus-node-exporter" >&2; exit 1; }

cargo build --release --quiet --bin tcmon
cargo build --release --quiet --example rawdump -p tcmon-netlink
TCMON=$PWD/target/release/tcmon
RAW=$PWD/target/release/examples/rawdump

NS=tcmon-bench-serve-$$
PORT=29210
NE_PORT=29211
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
big_tree "$NS" "$CLASSES"

# tcmon reads the namespace from outside (--netns) and listens on the host's loopback;
# node_exporter has no such option, so it runs inside the namespace, on that loopback.
"$TCMON" serve --netns "$NS" --dev v0 --listen "127.0.0.1:$PORT" 2>/dev/null &
TCMON_PID=$!
pids+=("$TCMON_PID")
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" prometheus-node-exporter --collector.disable-defaults --collector.qdisc \
  --web.listen-address="127.0.0.1:$NE_PORT" >/dev/null 2>&1 &
pids+=("$!")

wait_up() { for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "not up: $*" >&2; exit 1; }
wait_up curl -sf "http://127.0.0.1:$PORT/healthz"
wait_up ip netns exec "$NS" curl -sf "http://127.0.0.1:$NE_PORT/metrics"
sleep 2

OM='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
# times NAME PAUSE CMD...: SCRAPES response times in ms, PAUSE seconds apart
times() {
  local pause=$1; shift
  for ((r = 0; r < SCRAPES; r++)); do
    "$@" -s -o /dev/null -w '%{time_total}\n'
    [ "$pause" = 0 ] || sleep "$pause"
  done | awk '{printf "%.3f\n", $1 * 1000}' | sort -n
}
stats() { awk '{a[NR]=$1} END {printf "median %7.1f ms   p99 %7.1f ms", a[int((NR+1)/2)], a[int(NR*0.99+0.999)]}'; }

# the agent's steady poll as it exports it, median of 15 polls, against the kernel's floor
# (the same dumps repeated in one process, bytes dropped), measured now on the same tree
# (read from /healthz: a scrape of /metrics renders megabytes and would compete with the poll)
polls=$(for _ in $(seq 15); do
  curl -s "http://127.0.0.1:$PORT/healthz" | sed -n 's/.*took \([0-9.]*\) ms.*/\1/p'
  sleep 1.05
done | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}')
IFINDEX=$(ip -n "$NS" -o link show v0 | cut -d: -f1)
floor=$(ip netns exec "$NS" "$RAW" "$IFINDEX" 21 2>&1 | awk '/bytes in/ {
  t = $4; if (t ~ /ms$/) { sub(/ms$/, "", t) } else { sub(/s$/, "", t); t *= 1000 }; printf "%.1f", t / 21 }')
# the same dumps at the poll's own cadence (1 s apart: caches go cold between polls), median of 15
floor_1s=$(ip netns exec "$NS" "$RAW" "$IFINDEX" 15 1000 2>&1 | awk '/^median/ {printf "%.1f", $2}')
# and with the classes in one dump, as tc asks for them (the agent asks per qdisc with classes)
floor_1s_whole=$(ip netns exec "$NS" "$RAW" "$IFINDEX" 15 1000 whole 2>&1 | awk '/^median/ {printf "%.1f", $2}')
series_tcmon=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | grep -vc '^#')
bytes_tcmon=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | wc -c)
series_ne=$(ip netns exec "$NS" curl -s "http://127.0.0.1:$NE_PORT/metrics" | grep -c '^node_qdisc')

bytes_gz=$(curl -s -H "Accept: $OM" -H 'Accept-Encoding: gzip' "http://127.0.0.1:$PORT/metrics" | wc -c)
t_om=$(times 0 curl -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | stats)
t_om_fresh=$(times 1.05 curl -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | stats)
# Prometheus asks for gzip (Accept-Encoding: gzip) and scrapes once per poll at most
t_gz_fresh=$(times 1.05 curl --compressed -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | stats)
t_text=$(times 0 curl "http://127.0.0.1:$PORT/metrics" | stats)
t_ne=$(times 0 ip netns exec "$NS" curl "http://127.0.0.1:$NE_PORT/metrics" | stats)

# CPU and memory of a fresh process scraped as Prometheus does: every 15 s, gzip. (The plain
# scrapes above hold ~30 MB renderings each: a client that cannot take gzip costs that much.)
# Twice: as built (serve returns freed pages at once, in 4 KiB pages), and with mimalloc's
# defaults (a 1 s purge delay, transparent huge pages allowed), to show what that choice is worth.
kill "$TCMON_PID"
wait "$TCMON_PID" 2>/dev/null || true
hz=$(getconf CLK_TCK)
EXTRA=()
cpu_window() {
  env "$@" "$TCMON" serve --netns "$NS" --dev v0 --listen "127.0.0.1:$PORT" "${EXTRA[@]}" >/dev/null 2>&1 &
  TCMON_PID=$!
  pids+=("$TCMON_PID")
  wait_up curl -sf "http://127.0.0.1:$PORT/healthz"
  sleep 2
  # CPU: utime + stime ticks over CPU_S seconds, scraped every 15 s.
  ticks() { awk '{print $14 + $15}' "/proc/$TCMON_PID/stat"; }
  local t0 t1 s
  t0=$(ticks)
  for ((s = 0; s < CPU_S; s += EVERY)); do
    curl -s -o /dev/null --compressed -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics"
    sleep $((CPU_S - s < EVERY ? CPU_S - s : EVERY))
  done
  t1=$(ticks)
  cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$CPU_S" 'BEGIN {printf "%.1f", d / hz / s * 100}')
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$TCMON_PID/status")
  hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$TCMON_PID/status")
  poll_s=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^tcmon_poll_duration_seconds/ {print $2}')
  size=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | awk '!/^#/ {n++} {b += length($0) + 1} END {printf "%d series, %.1f MB", n, b / 1e6}')
  window="CPU $cpu% of a core (target < 5%), RSS $rss MB, peak $hwm MB (target < 64 MB); last poll $poll_s s; /metrics $size"
  kill "$TCMON_PID"
  wait "$TCMON_PID" 2>/dev/null || true
}
EVERY=15
cpu_window X=1
w_default=$window
cpu_window MIMALLOC_PURGE_DELAY=1000 MIMALLOC_ALLOW_THP=1
w_purge=$window
# the issue's harder case: a gzipped scrape every second, each one after a new poll
EVERY=1
cpu_window X=1
w_every_s=$window
# and with every class carrying a packet a second: every counter changes between two scrapes,
# and every class has measured queueing delay
busy_tree "$NS" "$CLASSES"
pids+=("$BUSY_PID")
sleep 2
cpu_window X=1
w_busy=$window
GROUPS_CFG=$(mktemp)
printf '[serve]\nmetrics = ["counters", "backlog", "htb_rates", "htb_xstats", "qdisc_kinds", "filter_chains", "sojourn", "class_sojourn"]\n' >"$GROUPS_CFG"
EXTRA=(--config "$GROUPS_CFG")
cpu_window X=1
w_busy_classes=$window
rm -f "$GROUPS_CFG"

echo "tree: $CLASSES HTB classes + pfifo leaves on one veth; $SCRAPES scrapes each"
echo "tcmon /metrics: $series_tcmon series, $((bytes_tcmon / 1024)) KiB ($((bytes_gz / 1024)) KiB gzipped); node_exporter qdisc collector: $series_ne series (root qdiscs only)"
printf '%-52s %s\n' "tcmon, OpenMetrics, back to back" "$t_om"
printf '%-52s %s\n' "tcmon, OpenMetrics, first scrape after each poll" "$t_om_fresh"
printf '%-52s %s\n' "tcmon, OpenMetrics gzip, first after each poll" "$t_gz_fresh"
printf '%-52s %s\n' "tcmon, text 0.0.4, back to back" "$t_text"
printf '%-52s %s\n' "node_exporter --collector.qdisc, back to back" "$t_ne"
echo "tcmon serve's poll (as exported, read from /healthz, median of 15): $polls ms"
echo "  the raw dumps back to back in one process: $floor ms: $(awk -v a="$polls" -v b="$floor" 'BEGIN {printf "%.2f", a / b}')x (target <= 1.3x)"
echo "  the raw dumps 1 s apart, as the agent polls: $floor_1s ms: $(awk -v a="$polls" -v b="$floor_1s" 'BEGIN {printf "%.2f", a / b}')x (target <= 1.3x)"
echo "    (with the classes in one dump, as tc asks: $floor_1s_whole ms: $(awk -v a="$polls" -v b="$floor_1s_whole" 'BEGIN {printf "%.2f", a / b}')x)"
echo "tcmon at a 1 s poll, scraped every 15 s with gzip, over ${CPU_S} s:"
echo "  as built:                   $w_default"
echo "  mimalloc's defaults:        $w_purge"
echo "tcmon at a 1 s poll, scraped every second with gzip, over ${CPU_S} s:"
echo "  as built:                   $w_every_s"
echo "  every class busy:           $w_busy"
echo "  busy, + class_sojourn:      $w_busy_classes"
