#!/usr/bin/env bash
# The moonshot of issue "the agent at 50,000 classes": 1,000 classes polled at 100 Hz on one
# core (the rate LibreQoS wanted for queue stats). Builds CLASSES HTB classes with pfifo leaves
# (benches/big_tree.sh) and runs the agent (poll, rates, diagnosis, history) at HZ for SECONDS,
# then prints the rate reached and its CPU, and the median of each step of a poll; for scale,
# the same at 1 Hz, one `tc -s -d class show` + `tc -s qdisc show` of the same tree, and the
# raw netlink dumps of it (the kernel's floor: the dumps the agent asks for, bytes dropped; and,
# for comparison, with the classes in one dump as tc asks). First the agent at 1 Hz takes turns
# with tc and the floor (7 rounds, 5 above 20,000 classes), and each round's ratios are taken;
# then the long runs' medians are compared with the rounds' medians. With
# HZ 1 it is the breakdown of a poll at the agent's default interval. TREE `libreqos` builds
# LibreQoS's layout instead (benches/big_tree.sh's libreqos_tree, CLASSES circuits over 4 TX
# queues), `libreqos-u32` the same with a u32 filter per circuit. Needs root.
#
# Usage: benches/poll_100hz.sh [CLASSES] [HZ] [SECONDS] [TREE]     (defaults 1000, 100, 10, big)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-1000}
HZ=${2:-100}
SECONDS_=${3:-10}
TREE=${4:-big}
[ "$(id -u)" = 0 ] || { echo "SKIPPED poll_100hz: needs root"; exit 0; }
cargo build --release --quiet --example hz -p tcmon-agent
cargo build --release --quiet --example rawdump -p tcmon-netlink
HZBIN=$PWD/target/release/examples/hz
RAW=$PWD/target/release/examples/rawdump
NS=tcmon-bench-hz-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
named_tree "$NS" "$CLASSES" "$TREE"
# fewer rounds where one takes seconds
ROUNDS=$((CLASSES > 20000 ? 5 : 7))
# tcmon reads the qdiscs tc lists only with `invisible` (the default FIFOs the kernel puts
# under HTB leaves: their drops and backlog are the leaves' queues), so tc is asked for them too
tc_once() {
  local t0 t1
  t0=$(date +%s%N)
  tc -n "$NS" -s -d class show dev v0 >/dev/null
  tc -n "$NS" -s -d qdisc show dev v0 "$@" >/dev/null
  t1=$(date +%s%N)
  awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d / 1e6}'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
IFINDEX=$(ip -n "$NS" -o link show v0 | cut -d: -f1)
# the raw dumps of the same links, qdiscs and classes (bytes dropped): N PAUSE_MS [whole]
# (`whole`: the classes in one dump, as tc asks for them); prints their median
raw() { ip netns exec "$NS" "$RAW" "$IFINDEX" "$1" "$2" ${3:-} 2>&1 | awk '/^median/ {print $2}'; }
# the agent's median poll without a filter read (the same dumps as tc) in hz's output
plain_poll() { awk '/without a filter read/ {match($0, /read [0-9.]+ ms/); split(substr($0, RSTART, RLENGTH), a, " "); q = a[2]} /median poll [0-9]/ {match($0, /median poll [0-9.]+/); p = substr($0, RSTART + 12, RLENGTH - 12)} END {print (q != "" ? q : p)}'; }
# This machine's speed drifts by tens of percent over minutes: tc, the floor (1 s apart, as
# the agent polls) and the agent (at 1 Hz, its polls without a filter read) take turns, and
# each round's ratios are of figures seconds apart (a minute on the biggest trees).
if [ "$CLASSES" -gt 20000 ]; then
  TC_N=1 RAW_N=1 AGENT_S=15
else
  TC_N=3 RAW_N=5 AGENT_S=8
fi
tcs=() floors=() wholes=() polls=() r_tc=() r_floor=()
for r in $(seq "$ROUNDS"); do
  ts=()
  for _ in $(seq "$TC_N"); do ts+=("$(tc_once invisible)"); done
  t=$(median "${ts[@]}") f=$(raw "$RAW_N" 1000) w=$(raw "$RAW_N" 1000 whole)
  p=$("$HZBIN" "$NS" v0 1 "$AGENT_S" | plain_poll)
  tcs+=("$t") floors+=("$f") wholes+=("$w") polls+=("$p")
  r_tc+=("$(awk -v p="$p" -v t="$t" 'BEGIN {printf "%.2f", p / t}')")
  r_floor+=("$(awk -v p="$p" -v f="$f" 'BEGIN {printf "%.2f", p / f}')")
  echo "round $r: tc $t ms, floor $f ms (classes in one dump: $w ms), agent's poll $p ms: ${r_tc[-1]}x tc, ${r_floor[-1]}x the floor"
done
echo "agent's poll at 1 Hz, taking turns with tc and the floor: median $(median "${polls[@]}") ms, median of the rounds' ratios $(median "${r_tc[@]}")x tc, $(median "${r_floor[@]}")x the floor"
floor=$(median "${floors[@]}") whole=$(median "${wholes[@]}")
tc_ms=$(median "${tcs[@]}")
echo "tc -s -d class show + tc -s -d qdisc show invisible (the same qdiscs and classes): $tc_ms ms (median of $ROUNDS rounds)"
echo "  (without the invisible qdiscs: $(tc_once) ms)"
echo "raw netlink dumps of the same links, qdiscs and classes (the floor), 1 s apart: $floor ms (median of $ROUNDS rounds)"
echo "  (the classes in one dump, as tc asks: $whole ms)"
# The long runs give the rate reached, the CPU and each step's median; their polls are
# compared with the rounds' floor and tc, measured up to minutes before (the rounds' ratios
# above are the ones of figures taken together).
agent() {
  local out
  out=$("$HZBIN" "$NS" v0 "$@")
  echo "$out"
  echo "$out" | awk -v f="$floor" -v t="$tc_ms" '
    /median poll [0-9]/ {match($0, /median poll [0-9.]+/); p = substr($0, RSTART + 12, RLENGTH - 12); printf "  median poll / the rounds'"'"' floor: %.2fx, / tc: %.2fx\n", p / f, p / t}
    /without a filter read/ {match($0, /read [0-9.]+ ms \([0-9]+ polls/); split(substr($0, RSTART, RLENGTH), a, " "); sub(/\(/, "", a[4]); if (a[4] + 0 > 0) {printf "  without a filter read (the same dumps as tc): / the rounds'"'"' floor: %.2fx, / tc: %.2fx\n", a[2] / f, a[2] / t}}'
}
agent "$HZ" "$SECONDS_"
agent "$HZ" "$SECONDS_" no-bpf
[ "$HZ" = 1 ] || agent 1 "$SECONDS_"
