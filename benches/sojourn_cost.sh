#!/usr/bin/env bash
# What the eBPF measurement of real packets' queueing delay costs (issue 16).
#
# A veth pair between two throwaway namespaces; on the sender's side an HTB shaper at RATE
# (default 5gbit, above what the streams reach, so the program runs on every packet at full
# speed) with a 1000-packet pfifo leaf. STREAMS TCP streams (python3 senders, one receiver)
# run for SECS seconds in each of three setups, interleaved ROUNDS times:
#   none     no tcmon
#   no-bpf   `tcmon serve --no-bpf` polling the namespace every second (the agent's own cost)
#   bpf      `tcmon serve` measuring (the program on both qdisc tracepoints)
#   bpf/8    the same with `[sojourn] sample_every = 8`
# twice: with GSO (64 kB super-packets, what a host sends) and with gso_max_segs 1 (full-size
# packets: the most packets per byte, the program's worst case).
# Printed per setup: throughput (Gbit/s), CPU busy (cores, from /proc/stat, the whole
# machine), CPU per Gbit/s, packets per second through the shaper; and the ratios bpf/no-bpf.
# With bpftool, the programs' own run time too (kernel.bpf_stats_enabled): nanoseconds per
# call and the share of the CPU they took, exact where the CPU figures above are noisy.
# Then the map memory at the default sizes, and at 50,000 classes (the maps do not grow with
# classes: they are sized by [sojourn] flows and in_flight).
#
# Needs root and python3. Usage: benches/sojourn_cost.sh [SECS] [ROUNDS] [STREAMS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-8}
ROUNDS=${2:-3}
STREAMS=${3:-2}
RATE=${4:-5gbit}
[ "$(id -u)" = 0 ] || { echo "SKIPPED sojourn_cost: needs root"; exit 0; }
cargo build --release --quiet --bin tcmon
TCMON=$PWD/target/release/tcmon
A=tcmon-bench-sja-$$
B=tcmon-bench-sjb-$$
PORT=29310
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip -n "$A" link add v0 type veth peer name v1 netns "$B"
ip -n "$A" addr add 10.88.0.1/24 dev v0; ip -n "$B" addr add 10.88.0.2/24 dev v1
ip -n "$A" link set v0 up; ip -n "$B" link set v1 up; ip -n "$A" link set lo up
tc -n "$A" qdisc add dev v0 root handle 1: htb default 10
tc -n "$A" class add dev v0 parent 1: classid 1:10 htb rate "$RATE"
tc -n "$A" qdisc add dev v0 parent 1:10 handle 10: pfifo limit 1000

RECV=$(mktemp); SEND=$(mktemp); S8=$(mktemp); PSTATS=$(mktemp)
command -v bpftool >/dev/null && sysctl -q kernel.bpf_stats_enabled=1
printf '[sojourn]\nsample_every = 8\n' > "$S8"
cat > "$RECV" <<'PY'
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.88.0.2", int(sys.argv[1]))); s.listen(64)
def drain(c):
    b = bytearray(1 << 20)
    while c.recv_into(b): pass
while True:
    c, _ = s.accept(); threading.Thread(target=drain, args=(c,), daemon=True).start()
PY
cat > "$SEND" <<'PY'
import socket, sys, time
end = time.time() + float(sys.argv[2]); c = socket.create_connection(("10.88.0.2", int(sys.argv[1])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
buf = b"\0" * (1 << 20)
while time.time() < end: c.sendall(buf)
PY
ip netns exec "$B" python3 "$RECV" "$PORT" & pids+=("$!")
sleep 0.5

# total run time (ns) and calls of the loaded on_enqueue/on_dequeue programs
progstats() {
  command -v bpftool >/dev/null || { echo "0 0"; return; }
  bpftool prog show 2>/dev/null | awk '/name on_(enqueue|dequeue)/ {
    for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t += $(i+1); if ($i == "run_cnt") c += $(i+1) } }
    END { print t + 0, c + 0 }'
}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
bytes_sent() { tc -n "$A" -s class show dev v0 classid 1:10 | awk '/Sent/{print $2, $4}'; }
# one run: prints "gbit cores pps"
run() {
  local setup=$1 serve=""
  case $setup in
    no-bpf) "$TCMON" serve --netns "$A" --no-bpf --listen 127.0.0.1:29311 2>/dev/null & serve=$! ;;
    bpf) "$TCMON" serve --netns "$A" --listen 127.0.0.1:29311 2>/dev/null & serve=$! ;;
    bpf/8) "$TCMON" serve --netns "$A" --listen 127.0.0.1:29311 --config "$S8" 2>/dev/null & serve=$! ;;
  esac
  [ -n "$serve" ] && { for _ in $(seq 50); do curl -sf http://127.0.0.1:29311/healthz >/dev/null 2>&1 && break; sleep 0.1; done; sleep 1; }
  if [ "${setup#bpf}" != "$setup" ] && ! curl -s http://127.0.0.1:29311/metrics | grep -q '^tcmon_sojourn_enabled{.*} 1'; then
    echo "the measurement is off in setup $setup:" >&2
    curl -s http://127.0.0.1:29311/metrics | grep '^tcmon_sojourn_info' >&2
    kill "$serve"; exit 1
  fi
  read -r b0 p0 < <(bytes_sent); read -r u0 t0 < <(busy); read -r r0 n0 < <(progstats)
  for _ in $(seq "$STREAMS"); do ip netns exec "$A" python3 "$SEND" "$PORT" "$SECS" & done
  wait $(jobs -p | grep -v -e "${pids[0]}" -e "${serve:-x}") 2>/dev/null || true
  read -r b1 p1 < <(bytes_sent); read -r u1 t1 < <(busy); read -r r1 n1 < <(progstats)
  if [ "$((n1 - n0))" -gt 0 ]; then
    awk -v r="$((r1 - r0))" -v n="$((n1 - n0))" -v s="$SECS" -v u="$((u1 - u0))" -v t="$((t1 - t0))" -v c="$(nproc)" -v w="$setup" \
      'BEGIN { printf "%s %.0f %.4f %.2f\n", w, r / n, r / 1e9 / s, (r / 1e9 / s) / (u / t * c) * 100 }' >> "$PSTATS"
  fi
  if [ -n "$serve" ]; then
    [ "$setup" = bpf ] && curl -s http://127.0.0.1:29311/metrics | grep -E '^tcmon_sojourn_(enabled|map_bytes)' > /tmp/sojourn_cost_state.$$
    kill "$serve"; wait "$serve" 2>/dev/null || true
  fi
  awk -v b="$((b1 - b0))" -v p="$((p1 - p0))" -v u="$((u1 - u0))" -v t="$((t1 - t0))" -v s="$SECS" -v n="$(nproc)" \
    'BEGIN { printf "%.3f %.3f %.0f\n", b * 8 / s / 1e9, u / t * n, p / s }'
}

for mode in gso mtu; do
  # TCP always builds GSO packets (the stack segments them after the qdisc when the device
  # cannot): only gso_max_segs 1 makes the shaper see full-size packets
  if [ $mode = mtu ]; then ip -n "$A" link set v0 gso_max_segs 1; fi
  declare -A G C P
  for r in $(seq "$ROUNDS"); do
    for setup in none no-bpf bpf bpf/8; do
      read -r g c p < <(run $setup)
      G[$setup]+="$g "; C[$setup]+="$c "; P[$setup]+="$p "
    done
  done
  med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  echo "== $mode: $STREAMS cubic streams through an HTB at $RATE, ${SECS}s x $ROUNDS rounds (medians) =="
  printf "%-7s %9s %9s %12s %12s\n" setup Gbit/s cores cores/Gbit packets/s
  for setup in none no-bpf bpf bpf/8; do
    g=$(echo "${G[$setup]}" | med); c=$(echo "${C[$setup]}" | med); p=$(echo "${P[$setup]}" | med)
    printf "%-7s %9s %9s %12s %12s\n" $setup "$g" "$c" "$(awk -v c="$c" -v g="$g" 'BEGIN{printf "%.3f", c/g}')" "$p"
  done
  gn=$(echo "${G[no-bpf]}" | med); cn=$(echo "${C[no-bpf]}" | med)
  for setup in bpf bpf/8; do
    gb=$(echo "${G[$setup]}" | med); cb=$(echo "${C[$setup]}" | med)
    awk -v s="$setup" -v gb="$gb" -v gn="$gn" -v cb="$cb" -v cn="$cn" 'BEGIN {
      printf "%s against no-bpf: throughput %.3fx, CPU per Gbit %.3fx (%+.1f%%)\n", s, gb/gn, (cb/gb)/(cn/gn), ((cb/gb)/(cn/gn)-1)*100 }'
  done
  if [ -s "$PSTATS" ]; then
    echo "the programs' own run time (bpftool; median of the runs): ns per call, cores, % of the CPU used"
    for setup in bpf bpf/8; do
      awk -v w="$setup" '$1 == w' "$PSTATS" | sort -k3 -g | awk '{a[NR]=$0} END {split(a[int((NR+1)/2)], f, " "); printf "  %-6s %5d ns/call  %.4f cores  %.2f%% of the CPU used\n", f[1], f[2], f[3], f[4]}'
    done
    : > "$PSTATS"
  fi
  unset G C P
done
command -v bpftool >/dev/null && sysctl -q kernel.bpf_stats_enabled=0
echo "== the program's state and map memory (defaults: 65,536 flows, 131,072 packets in flight) =="
cat /tmp/sojourn_cost_state.$$; rm -f /tmp/sojourn_cost_state.$$ "$RECV" "$SEND" "$S8" "$PSTATS"
