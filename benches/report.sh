#!/usr/bin/env bash
# Runs the whole-process benchmarks at the sizes docs/performance.md quotes, keeps each one's
# raw output under benches/runs/DATE/, and prints the ratios they report as one Markdown table
# (what, figure or ratio, the bench and its arguments, the date) to update docs/performance.md
# from. Needs root (every bench does), and what each bench needs (curl, tmux, python3,
# prometheus, prometheus-node-exporter, bpftool): a bench that cannot run says SKIPPED in its
# output and adds no rows.
#
# Usage: sudo benches/report.sh [BENCH...]          run these (default: all, in the order below)
#        benches/report.sh --table DIR              only print the table of an earlier run's DIR
#
# Sizes: each bench's arguments can be overridden by an environment variable named after it in
# capitals (DUMP_10K, SERVE_10K, POLL_10K, POLL_50K_BIG, POLL_50K_LIBREQOS_U32, POLL_100HZ,
# SOJOURN_COST, SOJOURN_SCALE, CHECK_SCALE, CHECK_LIBREQOS, CHECK_LIBREQOS_U32,
# PROMETHEUS_SCALE), e.g.
#   sudo DUMP_10K="10000 21" CHECK_SCALE="5000 2000 10000" benches/report.sh dump_10k check_scale
# The runs take about an hour with the default sizes; run them on an otherwise idle machine, and
# compare ratios (taken within one run) rather than absolute times across days.
set -euo pipefail
cd "$(dirname "$0")/.."

# name | script | default arguments (the sizes of docs/performance.md)
BENCHES=(
  "dump_10k|dump_10k.sh|10000 21"
  "serve_10k|serve_10k.sh|10000 60 60"
  "poll_10k|poll_100hz.sh|10000 1 15"
  "poll_50k_big|poll_100hz.sh|50000 1 30 big"
  "poll_50k_libreqos_u32|poll_100hz.sh|50000 1 60 libreqos-u32"
  "poll_100hz|poll_100hz.sh|1000 100 10"
  "sojourn_cost|sojourn_cost.sh|6 3 2"
  "sojourn_scale|sojourn_scale.sh|50000 10000 2000 15"
  "check_scale|check_scale.sh|20000 10000 50000"
  "check_libreqos|check_libreqos.sh|10000 4"
  "check_libreqos_u32|check_libreqos.sh|10000 4 u32"
  "prometheus_scale|prometheus_scale.sh|50000 4"
  "record|record.sh|10000 1000 60 2 610"
)

# The table: every line of a raw output that states a ratio ("1.23x") or a target, as a row.
table() {
  local dir=$1 date f name cmd line
  date=$(basename "$dir")
  echo "| what | figure | bench | date |"
  echo "|---|---|---|---|"
  for f in "$dir"/*.txt; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .txt)
    cmd=$(sed -n 's/^# command: //p' "$f" | head -1)
    { grep -E '[0-9]x\b|target|of the CPU used' "$f" || true; } | { grep -v '^#' || true; } | while IFS= read -r line; do
      line=$(echo "$line" | sed 's/^ *//; s/|/\\|/g')
      # "what: figure" where the line has a colon, else the whole line as the figure
      if [[ $line == *": "* ]]; then
        echo "| $name: ${line%%: *} | ${line#*: } | \`$cmd\` | $date |"
      else
        echo "| $name | $line | \`$cmd\` | $date |"
      fi
    done
  done
}

if [ "${1:-}" = --table ]; then
  [ -d "${2:-}" ] || { echo "usage: $0 --table benches/runs/DATE" >&2; exit 2; }
  table "$2"
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "report.sh: the benches need root" >&2; exit 1; }
want=("$@")
for w in "${want[@]}"; do
  printf '%s\n' "${BENCHES[@]}" | cut -d'|' -f1 | grep -qx -- "$w" ||
    { echo "report.sh: no bench named $w (have: $(printf '%s\n' "${BENCHES[@]}" | cut -d'|' -f1 | tr '\n' ' '))" >&2; exit 2; }
done
DATE=$(date -u +%F)
OUT=benches/runs/$DATE
mkdir -p "$OUT"
for b in "${BENCHES[@]}"; do
  IFS='|' read -r name script args <<<"$b"
  if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx "$name"; then
    continue
  fi
  var=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  args=${!var:-$args}
  log=$OUT/$name.txt
  echo "== $name: benches/$script $args (raw output: $log)" >&2
  {
    echo "# command: benches/$script $args"
    echo "# date: $(date -u '+%F %T') UTC; commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (modified)')"
    echo "# machine: $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2086 # the arguments are words
    "benches/$script" $args 2>&1 || echo "# exit status $?"
  } | tee "$log" >&2
done
table "$OUT"
