#!/usr/bin/env bash
# Whole-process benchmark of one poll on a big tree (issue: the collector).
#
# Builds 10,000 HTB classes, each with a pfifo leaf, on a veth in a throwaway namespace, then
# times, in the same run and namespace:
#   tcmon   `tcmon dump --json --no-filters --dev v0` (links + qdiscs + classes, decoded, JSON)
#   tc      `tc -s -d class show dev v0` + `tc -s qdisc show dev v0`
#   floor   `rawdump IFINDEX`: the same netlink dumps, bytes read and thrown away
# and prints medians, the ratios, and tcmon's peak RSS. Needs root.
#
# Usage: benches/dump_10k.sh [CLASSES] [RUNS]     (defaults 10000 and 21)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-10000}
RUNS=${2:-21}
[ "$(id -u)" = 0 ] || { echo "SKIPPED dump_10k: needs root"; exit 0; }

cargo build --release --quiet --bin tcmon
cargo build --release --quiet --example rawdump --example poll -p tcmon-netlink
TCMON=$PWD/target/release/tcmon
RAW=$PWD/target/release/examples/rawdump
POLL=$PWD/target/release/examples/poll

NS=tcmon-bench-$$
cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
big_tree "$NS" "$CLASSES"
IFINDEX=$(ip -n "$NS" -o link show v0 | cut -d: -f1)

tc_both() { tc -s -d class show dev v0; tc -s qdisc show dev v0; }
export -f tc_both

objects=$(ip netns exec "$NS" "$TCMON" dump --json --no-filters --dev v0 |
  python3 -c 'import json,sys; i=json.load(sys.stdin)["interfaces"][0]; print(len(i["classes"]), len(i["qdiscs"]))')

# The commands run interleaved, one of each per round, so that the machine's drift over the run
# hits all of them alike; each prints its median wall time in ms.
times=$(ip netns exec "$NS" bash -c '
  runs=$1 tcmon=$2 raw=$3 ifindex=$4
  for ((r = 0; r < runs; r++)); do
    for c in tcmon tc floor filters; do
      case $c in
        tcmon) cmd=("$tcmon" dump --json --no-filters --dev v0) ;;
        tc) cmd=(bash -c tc_both) ;;
        floor) cmd=("$raw" "$ifindex") ;;
        filters) cmd=("$tcmon" dump --json --dev v0) ;;
      esac
      s=$(date +%s%N); "${cmd[@]}" >/dev/null 2>&1; e=$(date +%s%N)
      echo "$c $(( (e - s) / 1000 ))"
    done
  done' _ "$RUNS" "$TCMON" "$RAW" "$IFINDEX")
median() { echo "$times" | awk -v c="$1" '$1 == c {print $2}' | sort -n |
  awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'; }
t_tcmon=$(median tcmon)
t_tc=$(median tc)
t_floor=$(median floor)
t_filters=$(median filters)

# in-process: the agent's steady state, one Collector polling repeatedly (median), against the
# same dumps repeated in one process (mean, the first and slower dump of the process included)
poll_out=$(ip netns exec "$NS" "$POLL" "$RUNS" --dev v0)
t_poll=$(echo "$poll_out" | awk '/objects in/ {print $4}' | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}')
# its CPU: the kernel building the dumps, and tcmon decoding and sorting
poll_cpu=$(echo "$poll_out" | sed -n 's/^CPU per poll: //p')
t_floor_warm=$(ip netns exec "$NS" "$RAW" "$IFINDEX" "$RUNS" 2>&1 | awk -v n="$RUNS" '/bytes in/ {
  t = $4; if (t ~ /ms$/) { sub(/ms$/, "", t) } else { sub(/s$/, "", t); t *= 1000 }; printf "%.1f", t / n }')
rss_kb=$(ip netns exec "$NS" /usr/bin/time -f %M "$TCMON" dump --json --no-filters --dev v0 2>&1 >/dev/null | tail -1)

echo "tree: $CLASSES HTB classes + pfifo leaves (tcmon read: classes qdiscs = $objects); median of $RUNS runs"
printf '%-44s %8s ms\n' "tcmon dump --json --no-filters" "$t_tcmon"
printf '%-44s %8s ms\n' "tc -s -d class show + tc -s qdisc show" "$t_tc"
printf '%-44s %8s ms\n' "raw netlink dump (floor)" "$t_floor"
printf '%-44s %8s ms\n' "tcmon dump --json (with filters: 1 dump/parent)" "$t_filters"
printf '%-44s %8s ms (CPU per poll: %s)\n' "Collector::poll in a running process" "$t_poll" "$poll_cpu"
printf '%-44s %8s ms\n' "raw netlink dump repeated in one process" "$t_floor_warm"
awk -v a="$t_tcmon" -v t="$t_tc" -v f="$t_floor" -v p="$t_poll" -v w="$t_floor_warm" -v r="$rss_kb" 'BEGIN {
  printf "tcmon dump --json / floor = %.2fx (target <= 1.3x)\n", a / f
  if (w > 0) printf "poll in process / repeated raw dump = %.2fx\n", p / w
  printf "tc / tcmon dump --json    = %.2fx (target >= 2x)\n", t / a
  printf "tcmon peak RSS = %.1f MB (target < 64 MB)\n", r / 1024
}'
