#!/usr/bin/env bash
# The eBPF measurement on a big tree (issue 16): a LibreQoS-shaped shaper of CIRCUITS circuits
# (mq, an HTB per TX queue, one u32 filter per circuit address; benches/big_tree.sh), UDP to
# FLOWS circuit addresses round robin at PPS packets a second (every flow a different class),
# and `tcmon serve` (1 s poll) with and without the measurement (`--no-bpf`), one after the
# other on the same tree and traffic. Printed: the poll as the agent exports it
# (tcmon_poll_duration_seconds, median of SAMPLES), RSS, the flows in the kernel's table, the
# classes measured, the map memory; and the ratios with/without.
#
# Needs root, curl and python3. Usage: benches/sojourn_scale.sh [CIRCUITS] [FLOWS] [PPS] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CIRCUITS=${1:-50000}
FLOWS=${2:-10000}
PPS=${3:-4000}
SAMPLES=${4:-15}
[ "$(id -u)" = 0 ] || { echo "SKIPPED sojourn_scale: needs root"; exit 0; }
cargo build --release --quiet --bin tcmon
TCMON=$PWD/target/release/tcmon
NS=tcmon-bench-sjs-$$
PORT=29320
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
t0=$(date +%s.%N)
libreqos_tree "$NS" "$CIRCUITS" 4 u32
echo "tree: $CIRCUITS circuits with u32 filters in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') s"
# everything to 10/8 leaves through v0 to one static neighbour: no ARP per address
ip -n "$NS" addr add 10.255.0.1/24 dev v0
mac=$(ip -n "$NS" -o link show v1 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
ip -n "$NS" neigh add 10.255.0.2 lladdr "$mac" dev v0 nud permanent
ip -n "$NS" route add 10.0.0.0/8 via 10.255.0.2 dev v0 onlink
SEND=$(mktemp)
# The circuits' addresses as benches/big_tree.sh numbers them: 10.Q.(c/250).(c%250+1).
cat > "$SEND" <<'PY'
import socket, sys, time
flows, pps, circuits = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
per_q = (circuits + 3) // 4
dsts = [("10.%d.%d.%d" % (q, c // 250, c % 250 + 1), 9) for i in range(flows)
        for q, c in [(i % 4 + 1, (i // 4) % per_q)]]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
gap, n, start = 1.0 / pps, 0, time.time()
while True:
    s.sendto(b"x" * 200, dsts[n % flows]); n += 1
    ahead = start + n * gap - time.time()
    if ahead > 0: time.sleep(ahead)
PY
ip netns exec "$NS" python3 "$SEND" "$FLOWS" "$PPS" "$CIRCUITS" & pids+=("$!")

# reads the whole document (an early exit would fail curl, and the script, on the pipe)
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 ~ "^"m && !v {v = $2} END {print v}'; }
measure() {
  local label=$1; shift
  "$TCMON" serve --netns "$NS" --dev v0 --listen "127.0.0.1:$PORT" "$@" 2>/dev/null &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 5
  local polls=()
  for _ in $(seq "$SAMPLES"); do polls+=("$(metric tcmon_poll_duration_seconds)"); sleep 1; done
  local med rss classes flows mapb
  med=$(printf '%s\n' "${polls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  # per-class histograms are not in /metrics by default (the class_sojourn group): the API's
  classes=$(curl -s "http://127.0.0.1:$PORT/api/v1/snapshot" | python3 -c '
import json, sys
s = json.load(sys.stdin).get("sojourn", {})
print(sum(1 for o in s.get("objects", []) if o["object"] == "class"))')
  flows=$(metric tcmon_sojourn_flows); mapb=$(metric tcmon_sojourn_map_bytes)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf "%-8s poll %7.3f s  RSS %6.1f MB  classes measured %6s  flows in the kernel %6s  map %s MB\n" \
    "$label" "$med" "$(awk -v r="$rss" 'BEGIN{print r/1024}')" "$classes" "${flows:--}" \
    "$(awk -v b="${mapb:-0}" 'BEGIN{printf "%.1f", b/1e6}')"
  eval "poll_$label=$med rss_$label=$rss"
}
echo "== $FLOWS flows at $PPS packets/s, serve polling every 1 s =="
measure nobpf --no-bpf
measure bpf
awk -v a="$poll_bpf" -v b="$poll_nobpf" -v c="$rss_bpf" -v d="$rss_nobpf" 'BEGIN {
  printf "bpf/no-bpf: poll %.2fx, RSS %.2fx\n", a/b, c/d }'
rm -f "$SEND"
