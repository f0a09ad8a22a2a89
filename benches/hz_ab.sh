#!/usr/bin/env bash
# Two builds of the agent (crates/tcmon-agent/examples/hz.rs) against each other on one tree,
# taking turns with the raw dumps (the kernel's floor) so that the VM's drift, which on trees of
# 50,000 circuits moves the floor by 40% within minutes, hits both alike. Each round: the floor
# (3 dumps 1 s apart), then A and B at 1 Hz for SECONDS each; it prints their median polls.
# Build a hz binary of another commit with, for example:
#   git worktree add /tmp/old OLD && (cd /tmp/old && cargo build --release --example hz -p tcmon-agent)
# TREE as in benches/poll_100hz.sh: big, libreqos or libreqos-u32. Needs root.
#
# Usage: benches/hz_ab.sh HZ_A HZ_B [CLASSES] [TREE] [ROUNDS] [SECONDS]
#        (defaults 50000 libreqos-u32 2 40)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
[ $# -ge 2 ] || { echo "usage: benches/hz_ab.sh HZ_A HZ_B [CLASSES] [TREE] [ROUNDS] [SECONDS]" >&2; exit 2; }
A=$1 B=$2 CLASSES=${3:-50000} TREE=${4:-libreqos-u32} ROUNDS=${5:-2} SECS=${6:-40}
[ "$(id -u)" = 0 ] || { echo "SKIPPED hz_ab: needs root"; exit 0; }
cargo build --release --quiet --example rawdump -p tcmon-netlink
RAW=$PWD/target/release/examples/rawdump
NS=tcmon-bench-hzab-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
named_tree "$NS" "$CLASSES" "$TREE"
IFINDEX=$(ip -n "$NS" -o link show v0 | cut -d: -f1)
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r, the floor: $(ip netns exec "$NS" "$RAW" "$IFINDEX" 3 1000 2>&1 | tail -1)"
  for bin in "$A" "$B"; do
    echo "round $r, $bin:"
    "$bin" "$NS" v0 1 "$SECS" | grep -E "median poll|steps|no poll" | sed 's/^/  /'
  done
done
