#!/usr/bin/env bash
# Whole-process budgets of the diagnosis on trees where one mistake is repeated on every class
# (issue: diagnosis at ISP scale). Each tree is benches/big_tree.sh's flagged_tree: an HTB
# with r2q 100 and N leaves of 1 Mbit (ceil 10 Mbit), each with a 1000-packet pfifo, so every
# leaf has a quantum below the MTU and a queue of 1.2 s: every leaf is flagged twice.
#
# In the same run, on the same trees:
#   check at N        `tcmon check --window 1s` beyond its window, against one
#                     `tcmon dump --json` (target: within 4x), its peak RSS (target <= 160 MB)
#                     and its lines of output (target <= 200)
#   check --json      bytes at N/4 and N (target: ratio <= 4.6)
#   serve at SERVE_N  /metrics median over 20 scrapes, one after each poll, gzipped as
#                     Prometheus asks (target < 50 ms), RSS and peak RSS (target < 64 MB)
#   serve at N        time from start to the first /metrics with the tree (target <= 30 s),
#                     RSS (target <= 200 MB)
#   BIG classes       check, serve and the TUI (in tmux, 80x24) work: time and RSS of each
# Needs root, curl and tmux.
#
# Usage: benches/check_scale.sh [N] [SERVE_N] [BIG]     (defaults 20000 10000 50000)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
N=${1:-20000}
SERVE_N=${2:-10000}
BIG=${3:-50000}
[ "$(id -u)" = 0 ] || { echo "SKIPPED check_scale: needs root"; exit 0; }

cargo build --release --quiet --bin tcmon
TCMON=$PWD/target/release/tcmon
PORT=29212
pids=()
namespaces=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  tmux kill-session -t tcmon-bench-tui 2>/dev/null || true
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
# tree N: a flagged tree of N leaves in a namespace of its own, named in NS
tree() { NS=tcmon-bench-check-$1-$$; namespaces+=("$NS"); flagged_tree "$NS" "$1"; }
ms() { awk -v s="$1" -v e="$2" 'BEGIN {printf "%.0f", (e - s) / 1e6}'; }
now() { date +%s%N; }
# peak RSS in MB of a command, its output thrown away
# (check exits 1 or 2 for its findings)
peak() { { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null || true; } | tail -1 | awk '{printf "%.1f", $1 / 1024}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}'; }

# --- check at N and N/4 ---
tree "$N"; ns_n=$NS
tree $((N / 4)); ns_q=$NS
t0=$(now); "$TCMON" dump --json --netns "$ns_n" --dev v0 >/dev/null; t1=$(now)
dump_ms=$(ms "$t0" "$t1")
t0=$(now); "$TCMON" check --window 1s --netns "$ns_n" --dev v0 >/tmp/tcmon-check-$$.txt || true; t1=$(now)
check_ms=$(( $(ms "$t0" "$t1") - 1000 ))
lines=$(wc -l </tmp/tcmon-check-$$.txt)
rm -f /tmp/tcmon-check-$$.txt
check_rss=$(peak "$TCMON" check --window 1s --netns "$ns_n" --dev v0)
json_n=$("$TCMON" check --json --window 100ms --netns "$ns_n" --dev v0 | wc -c || true)
json_q=$("$TCMON" check --json --window 100ms --netns "$ns_q" --dev v0 | wc -c || true)
script_n=$("$TCMON" check --fix-script --window 100ms --netns "$ns_n" --dev v0 | wc -l || true)

# --- serve ---
# serve_run NS: starts serve (SERVE_PID), waits for the first /metrics that has the tree;
# FIRST: the seconds that took
serve_run() {
  local t0 t1
  FIRST=never
  t0=$(now)
  "$TCMON" serve --netns "$1" --dev v0 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
  SERVE_PID=$!
  pids+=("$SERVE_PID")
  for _ in $(seq 600); do
    # (grep -c reads it all: grep -q would stop curl with SIGPIPE, a failure under pipefail)
    if [ "$(curl -sf --compressed "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -c '^tcmon_class_bytes' || true)" -gt 0 ]; then
      t1=$(now)
      FIRST=$(awk -v s="$t0" -v e="$t1" 'BEGIN {printf "%.1f", (e - s) / 1e9}')
      return 0
    fi
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "tcmon serve exited" >&2; exit 1; }
    sleep 0.1
  done
}
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
hwm() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
OM='application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5'

tree "$SERVE_N"; ns_s=$NS
serve_run "$ns_s"
sleep 2
scrape_ms=$(for _ in $(seq 20); do
  curl -s -o /dev/null --compressed -H "Accept: $OM" -w '%{time_total}\n' "http://127.0.0.1:$PORT/metrics"
  sleep 1.05
done | awk '{printf "%.3f\n", $1 * 1000}' | median)
# memory as Prometheus leaves it, before the plain scrapes below (each holds a 29 MB rendering)
serve_rss=$(rss "$SERVE_PID"); serve_hwm=$(hwm "$SERVE_PID")
serve_bytes=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | wc -c)
serve_findings=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | grep -c '^tcmon_finding{' || true)
poll_s=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^tcmon_poll_duration_seconds/ {print $2}')
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true

serve_run "$ns_n"
first_n=$FIRST
sleep 3
serve_n_rss=$(rss "$SERVE_PID"); serve_n_hwm=$(hwm "$SERVE_PID")
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true

# --- BIG: check, serve, the TUI ---
ip netns del "$ns_q"
tree "$BIG"; ns_b=$NS
t0=$(now); big_rss=$(peak "$TCMON" check --window 1s --netns "$ns_b" --dev v0); t1=$(now)
big_check_ms=$(( $(ms "$t0" "$t1") - 1000 ))
big_lines=$("$TCMON" check --window 100ms --netns "$ns_b" --dev v0 | wc -l || true)
serve_run "$ns_b"
first_b=$FIRST
sleep 3
big_scrape_ms=$(for _ in $(seq 5); do
  curl -s -o /dev/null --compressed -H "Accept: $OM" -w '%{time_total}\n' "http://127.0.0.1:$PORT/metrics"
  sleep 1.05
done | awk '{printf "%.3f\n", $1 * 1000}' | median)
big_serve_rss=$(rss "$SERVE_PID"); big_serve_hwm=$(hwm "$SERVE_PID")
big_bytes=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | wc -c)
big_poll_s=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^tcmon_poll_duration_seconds/ {print $2}')
big_series=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | grep -vc '^#')
# tc reading the same qdiscs and classes (the issue's bar for a poll at this size)
t0=$(now); { tc -n "$ns_b" -s -d class show dev v0; tc -n "$ns_b" -s qdisc show dev v0; } >/dev/null; t1=$(now)
big_tc_ms=$(ms "$t0" "$t1")
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
tmux new-session -d -s tcmon-bench-tui -x 80 -y 24 "$TCMON --netns $ns_b --dev v0"
tui_pid=""
for _ in $(seq 300); do
  tui_pid=$(pgrep -f "^$TCMON --netns $ns_b" | head -1 || true)
  if [ -n "$tui_pid" ] && tmux capture-pane -p -t tcmon-bench-tui | grep -q 'Findings\|findings'; then break; fi
  sleep 0.1
done
sleep 5
tui_screen=$(tmux capture-pane -p -t tcmon-bench-tui)
tui_rss=$( [ -n "$tui_pid" ] && rss "$tui_pid" || echo "?")
tui_hwm=$( [ -n "$tui_pid" ] && hwm "$tui_pid" || echo "?")
tui_rows=$(echo "$tui_screen" | grep -c '1:' || true)
tmux send-keys -t tcmon-bench-tui q

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "trees: HTB r2q 100, leaves of 1 Mbit with a 1000-packet pfifo each (every leaf flagged twice)"
echo "check at $N leaves: $check_ms ms beyond its 1 s window, one dump --json $dump_ms ms: $(ratio "$check_ms" "$dump_ms")x (target <= 4x)"
echo "  peak RSS $check_rss MB (target <= 160 MB), $lines lines of output (target <= 200), fix script $script_n lines"
echo "check --json: $json_q bytes at $((N / 4)) leaves, $json_n at $N: $(ratio "$json_n" "$json_q")x (target <= 4.6x)"
echo "serve at $SERVE_N flagged leaves: /metrics median $scrape_ms ms, gzipped, one after each poll (target < 50 ms);"
echo "  RSS $serve_rss MB, peak $serve_hwm MB (target < 64 MB); $((serve_bytes / 1024)) KiB, $serve_findings tcmon_finding series; poll ${poll_s} s"
echo "serve at $N flagged leaves: first /metrics ${first_n} s after start (target <= 30 s), RSS $serve_n_rss MB, peak $serve_n_hwm MB (target <= 200 MB)"
echo "at $BIG flagged leaves:"
echo "  check: $big_check_ms ms beyond its window, peak RSS $big_rss MB, $big_lines lines"
echo "  serve: first /metrics ${first_b} s after start, median scrape (gzipped) $big_scrape_ms ms, $big_series series, $((big_bytes / 1024)) KiB, RSS $big_serve_rss MB, peak $big_serve_hwm MB"
echo "  serve's poll ${big_poll_s} s; tc -s -d class show + tc -s qdisc show: $big_tc_ms ms: $(ratio "$(awk -v p="$big_poll_s" 'BEGIN {print p * 1000}')" "$big_tc_ms")x (target <= 1x)"
echo "  TUI (tmux 80x24): RSS $tui_rss MB, peak $tui_hwm MB, $tui_rows tree rows on screen"
echo "$tui_screen" | sed 's/^/    | /'
