#!/usr/bin/env bash
# `tcmon check` on LibreQoS's layout (benches/big_tree.sh's libreqos_tree: mq, an HTB per TX
# queue, sites > access points > circuits), against one `tcmon dump --json` of the same tree in
# the same run: time beyond the window, peak RSS, findings, lines, fix-plan commands.
# Needs root.
#
# Usage: benches/check_libreqos.sh [CIRCUITS] [QUEUES] [u32]   (defaults 10000 and 4; u32: a
# u32 filter per circuit, LibreQoS's older classifier)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CIRCUITS=${1:-10000}
QUEUES=${2:-4}
FILTERS=${3:-}
[ "$(id -u)" = 0 ] || { echo "SKIPPED check_libreqos: needs root"; exit 0; }
cargo build --release --quiet --bin tcmon
TCMON=$PWD/target/release/tcmon
NS=tcmon-bench-lq-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
libreqos_tree "$NS" "$CIRCUITS" "$QUEUES" "$FILTERS"
classes=$(tc -n "$NS" class show dev v0 | wc -l)
now() { date +%s%N; }
t0=$(now); "$TCMON" dump --json --netns "$NS" --dev v0 >/dev/null; t1=$(now)
dump_ms=$(( (t1 - t0) / 1000000 ))
t0=$(now)
out=$({ /usr/bin/time -f 'PEAK %M' "$TCMON" check --window 1s --netns "$NS" --dev v0 || true; } 2>&1)
t1=$(now)
check_ms=$(( (t1 - t0) / 1000000 - 1000 ))
peak=$(echo "$out" | awk '/^PEAK/ {printf "%.1f", $2 / 1024}')
lines=$(echo "$out" | grep -vc '^PEAK\|^Command exited')
# (check exits 1 or 2 for its findings)
summary=$("$TCMON" check --json --window 100ms --netns "$NS" --dev v0 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(len(d["findings"]), sum(f["count"] for f in d["findings"]), sum(len(p["steps"]) for p in d["plan"]))' || true)
findings=${summary%% *}; rest=${summary#* }; objects=${rest%% *}; steps=${rest#* }
echo "LibreQoS layout: $CIRCUITS circuits over $QUEUES TX queues ($classes classes${FILTERS:+, a u32 filter per circuit})"
echo "check: $check_ms ms beyond its 1 s window, one dump --json $dump_ms ms: $(awk -v a="$check_ms" -v b="$dump_ms" 'BEGIN {printf "%.2f", a / b}')x; peak RSS $peak MB"
echo "  $findings findings about $objects objects, $lines lines of output, a fix plan of $steps commands"
if [ "$FILTERS" = u32 ]; then
  # an address no rule matches: every rule of every queue's chain is tried (the worst case)
  t0=$(now)
  "$TCMON" classify --netns "$NS" --dev v0 --proto udp --dport 9 10.255.255.254 >/dev/null || true
  t1=$(now)
  classify_ms=$(( (t1 - t0) / 1000000 ))
  answer=$("$TCMON" classify --netns "$NS" --dev v0 --proto udp --dport 9 10.255.255.254 | tail -1 || true)
  echo "classify (no rule matches: every rule tried): $classify_ms ms, $(awk -v a="$classify_ms" -v b="$dump_ms" 'BEGIN {printf "%.2f", a / b}')x one dump --json; $answer"
fi
