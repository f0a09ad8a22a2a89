#!/usr/bin/env bash
# A/B of two tcmon binaries (or one binary under two environments) on the tree of
# dump_10k.sh: `tcmon dump --json --no-filters --dev v0`, interleaved with the raw-dump floor,
# one of each per round, so that the machine's drift hits all three alike. Prints quartiles.
# Needs root.
#
# Usage: benches/dump_ab.sh BIN_A BIN_B [ROUNDS] [CLASSES]
#   env EA / EB: variables for A / B, e.g. EB=MIMALLOC_ALLOW_THP=0 (same binary twice)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
A=$(realpath "$1")
B=$(realpath "$2")
ROUNDS=${3:-61}
CLASSES=${4:-10000}
[ "$(id -u)" = 0 ] || { echo "SKIPPED dump_ab: needs root"; exit 0; }

cargo build --release --quiet --example rawdump -p tcmon-netlink
RAW=$PWD/target/release/examples/rawdump
NS=tcmon-ab-$$
cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
big_tree "$NS" "$CLASSES" 2>/dev/null
IFINDEX=$(ip -n "$NS" -o link show v0 | cut -d: -f1)

times=$(ip netns exec "$NS" env EA="${EA:-}" EB="${EB:-}" bash -c '
  rounds=$1 raw=$2 ifindex=$3 a=$4 b=$5
  # A failed run would look fast: stop instead.
  ms() {
    local s e
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }
    e=$(date +%s%N)
    echo $(( (e - s) / 1000 ))
  }
  run() {
    local t
    case $1 in
      A) t=$(ms env $EA "$a" dump --json --no-filters --dev v0) ;;
      B) t=$(ms env $EB "$b" dump --json --no-filters --dev v0) ;;
      floor) t=$(ms "$raw" "$ifindex") ;;
    esac || return 1
    echo "$1 $t"
  }
  for ((r = 0; r < rounds; r++)); do
    run floor || exit 1
    # A and B take turns going first, so that neither always runs right after the floor
    if ((r % 2)); then run B && run A; else run A && run B; fi || exit 1
  done' _ "$ROUNDS" "$RAW" "$IFINDEX" "$A" "$B")
echo "$times" |
  awk '{ v[$1] = v[$1] " " $2 } END { for (k in v) print k, v[k] }' | sort |
  while read -r name times; do
    echo "$times" | tr ' ' '\n' | sort -n | awk -v n="$name" '{ t[NR] = $1 } END {
      printf "%-6s p25 %6.1f  median %6.1f  p75 %6.1f  min %6.1f ms\n", n,
        t[int(NR / 4) + 1] / 1000, t[int((NR + 1) / 2)] / 1000, t[int(3 * NR / 4)] / 1000, t[1] / 1000 }'
  done
