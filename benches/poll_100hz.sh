#!/usr/bin/env bash
# The moonshot of issue "the agent at 50,000 classes": 1,000 classes polled at 100 Hz on one
# core (the rate LibreQoS wanted for queue stats). Builds CLASSES HTB classes with pfifo leaves
# (benches/big_tree.sh) and runs the agent (poll, rates, diagnosis, history) at HZ for SECONDS,
# then prints the rate reached and its CPU; for scale, the same at 1 Hz, and one
# `tc -s -d class show` + `tc -s qdisc show` of the same tree. Needs root.
#
# Usage: benches/poll_100hz.sh [CLASSES] [HZ] [SECONDS]     (defaults 1000, 100, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-1000}
HZ=${2:-100}
SECONDS_=${3:-10}
[ "$(id -u)" = 0 ] || { echo "SKIPPED poll_100hz: needs root"; exit 0; }
cargo build --release --quiet --example hz -p tcmon-agent
HZBIN=$PWD/target/release/examples/hz
NS=tcmon-bench-hz-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
big_tree "$NS" "$CLASSES" 2>/dev/null
t0=$(date +%s%N)
for _ in $(seq 20); do tc -n "$NS" -s -d class show dev v0 >/dev/null; tc -n "$NS" -s qdisc show dev v0 >/dev/null; done
t1=$(date +%s%N)
echo "tc -s -d class show + tc -s qdisc show: $(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d / 20 / 1e6}') ms each (mean of 20)"
"$HZBIN" "$NS" v0 "$HZ" "$SECONDS_"
"$HZBIN" "$NS" v0 "$HZ" "$SECONDS_" no-bpf
"$HZBIN" "$NS" v0 1 "$SECONDS_"
