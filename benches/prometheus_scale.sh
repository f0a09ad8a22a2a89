#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus`) scraping `tcmon serve` on a big tree every 15 s, as
# deployed: does it take the scrape, how long does it take, how many samples, and the memory
# of both. Builds benches/big_tree.sh's flagged_tree (HTB leaves with a pfifo each), runs serve
# with the default metric groups and, for scale, one scrape with every group. Needs root, curl,
# prometheus.
#
# Usage: benches/prometheus_scale.sh [CLASSES] [SCRAPES]     (defaults 50000 and 4)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-50000}
SCRAPES=${2:-4}
[ "$(id -u)" = 0 ] || { echo "SKIPPED prometheus_scale: needs root"; exit 0; }
command -v prometheus >/dev/null || { echo "install prometheus" >&2; exit 1; }
cargo build --release --quiet --bin tcmon
TCMON=$PWD/target/release/tcmon
NS=tcmon-bench-prom-$$
PORT=29230
PROM=29231
DIR=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
flagged_tree "$NS" "$CLASSES" 2>/dev/null
"$TCMON" serve --netns "$NS" --dev v0 --listen "127.0.0.1:$PORT" 2>/dev/null &
SERVE=$!; pids+=("$SERVE")
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
cat >"$DIR/prometheus.yml" <<YML
global:
  scrape_interval: 15s
  scrape_timeout: 10s
scrape_configs:
  - job_name: tcmon
    static_configs:
      - targets: ['127.0.0.1:$PORT']
YML
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
  --web.listen-address="127.0.0.1:$PROM" --log.level=warn >/dev/null 2>&1 &
PROM_PID=$!; pids+=("$PROM_PID")
q() { curl -s "http://127.0.0.1:$PROM/api/v1/query" --data-urlencode "query=$1" |
  python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'; }
sleep $((15 * SCRAPES + 5))
up=$(q 'up{job="tcmon"}')
dur=$(q 'max_over_time(scrape_duration_seconds{job="tcmon"}[5m])')
samples=$(q 'scrape_samples_scraped{job="tcmon"}')
count=$(q 'count_over_time(up{job="tcmon"}[5m])')
ok=$(q 'sum_over_time(up{job="tcmon"}[5m])')
mem() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
echo "tree: $CLASSES flagged HTB leaves with a pfifo each; Prometheus every 15 s, timeout 10 s, for $((15 * SCRAPES + 5)) s"
echo "scrapes: $count, of which up: $ok; last up: $up; samples per scrape: $samples; slowest scrape: ${dur} s"
echo "RSS: tcmon serve $(mem "$SERVE") MB, prometheus $(mem "$PROM_PID") MB"
OM='application/openmetrics-text;version=1.0.0'
bytes=$(curl -s -H "Accept: $OM" "http://127.0.0.1:$PORT/metrics" | wc -c)
gz=$(curl -s -H "Accept: $OM" -H 'Accept-Encoding: gzip' "http://127.0.0.1:$PORT/metrics" | wc -c)
echo "one scrape: $((bytes / 1024 / 1024)) MB of text, $((gz / 1024)) KiB gzipped (default groups)"
