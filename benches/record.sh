#!/usr/bin/env bash
# The flight recorder's budgets on the 10,000-class tree (benches/big_tree.sh): `tcmon serve`
# with and without `[record] dir`, in turns (the VM drifts), idle and with BUSY classes
# carrying a packet a second; for each, the CPU of a core over WINDOW seconds, and with the
# recording its bytes per sample and what a day of 1 s samples takes; then a second found and
# decoded from a busy recording of SEEK seconds (examples/seek.rs; the default, a keyframe
# interval and a little, puts the most deltas behind the last second). The busy classes each
# carry 1-20 UDP packets of 64-1,400 bytes a second, drawn at random, so that no two classes'
# counters move alike. Needs root, curl and python3.
#
# Usage: benches/record.sh [CLASSES] [BUSY] [WINDOW] [ROUNDS] [SEEK]
#        (defaults 10000 1000 60 2 610)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CLASSES=${1:-10000} BUSY=${2:-1000} WINDOW=${3:-60} ROUNDS=${4:-2} SEEK=${5:-610}
[ "$(id -u)" = 0 ] || { echo "SKIPPED record: needs root"; exit 0; }
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "SKIPPED record: needs curl and python3"; exit 0; }
cargo build -q --release --bin tcmon
cargo build -q --release -p tcmon-record --example seek
BIN=target/release/tcmon
NS=tcmon-bench-rec-$$
PORT=29213
WORK=$(mktemp -d /tmp/tcmon-bench-record.XXXXXX)
pid=
BUSY_PID=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  [ -z "$BUSY_PID" ] || kill "$BUSY_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
big_tree "$NS" "$CLASSES" 2>/dev/null
hz=$(getconf CLK_TCK)
printf '[serve]\nlisten = "127.0.0.1:%s"\n' "$PORT" >"$WORK/plain.toml"
printf '[serve]\nlisten = "127.0.0.1:%s"\n[record]\ndir = "%s/rec"\nbudget = "100GB"\n' "$PORT" "$WORK" >"$WORK/record.toml"

# one CONFIG: prints "CPU_PERCENT BYTES FRAMES" for WINDOW seconds of `serve` after a warm-up
one() {
  local cfg=$1 t0 t1 b0 b1 f0 f1
  rm -rf "$WORK/rec"
  "$BIN" serve --config "$cfg" --netns "$NS" --dev v0 --no-bpf >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  sleep 3
  size() { if [ -d "$WORK/rec" ]; then du -sb "$WORK/rec" | cut -f1; else echo 0; fi; }
  frames() {
    if [ -d "$WORK/rec" ]; then
      find "$WORK/rec" -name '*.tcidx' -printf '%s\n' | awk '{s += $1} END {print int(s / 24)}'
    else echo 0; fi
  }
  read -r t0 < <(awk '{print $14 + $15}' "/proc/$pid/stat")
  b0=$(size) f0=$(frames)
  sleep "$WINDOW"
  read -r t1 < <(awk '{print $14 + $15}' "/proc/$pid/stat")
  b1=$(size) f1=$(frames)
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  awk -v d=$((t1 - t0)) -v hz="$hz" -v w="$WINDOW" -v b=$((b1 - b0)) -v f=$((f1 - f0)) \
    'BEGIN {printf "%.2f %d %d\n", d / hz / w * 100, b, f}'
}

phase() {
  local name=$1 plain rec cpu_p=0 cpu_r=0 bytes=0 frames=0
  for ((r = 1; r <= ROUNDS; r++)); do
    one "$WORK/plain.toml" >"$WORK/out"
    read -r p _ _ <"$WORK/out"
    one "$WORK/record.toml" >"$WORK/out"
    read -r c b f <"$WORK/out"
    echo "$name round $r: serve ${p}% of a core, serve recording ${c}% ($b bytes in $f frames)"
    cpu_p=$(awk -v a="$cpu_p" -v b="$p" 'BEGIN {print a + b}')
    cpu_r=$(awk -v a="$cpu_r" -v b="$c" 'BEGIN {print a + b}')
    bytes=$((bytes + b)) frames=$((frames + f))
  done
  awk -v p="$cpu_p" -v c="$cpu_r" -v b="$bytes" -v f="$frames" -v n="$name" 'BEGIN {
    bps = b / f
    printf "RESULT %s: bytes per sample %.0f; a day of 1 s samples %.2f GB (budget 1 GB); CPU recording %.2f%% / not %.2f%% of a core = %.3fx (budget 1.10x)\n",
      n, bps, bps * 86400 / 1e9, c / '"$ROUNDS"', p / '"$ROUNDS"', c / p }'
}

# varied_traffic NS CLASSES: big_tree's first CLASSES leaf classes carry 1-20 packets of 64-1,400
# bytes each a second, at random (socket priority = the class id, which HTB takes as the class)
varied_traffic() {
  local ns=$1 classes=$2 mac
  ip -n "$ns" addr add 10.10.0.1/24 dev v0
  mac=$(ip -n "$ns" -o link show v1 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
  ip -n "$ns" neigh replace 10.10.0.2 lladdr "$mac" dev v0 nud permanent
  ip netns exec "$ns" python3 -c '
import random, socket, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
random.seed(7)
while True:
    t = time.monotonic()
    for minor in range(2, n + 2):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 0x10000 | minor)
        for _ in range(random.randint(1, 20)):
            try:
                s.sendto(b"x" * random.randint(64, 1400), ("10.10.0.2", 9))
            except OSError:
                pass
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
' "$classes" >/dev/null 2>&1 &
  BUSY_PID=$!
}

echo "tree: $CLASSES HTB classes with a pfifo each; serve --no-bpf at a 1 s poll; $WINDOW s windows, $ROUNDS rounds"
phase idle
varied_traffic "$NS" "$BUSY"
sleep 2
phase "busy ($BUSY classes with 1-20 packets a second)"
# keep the last busy recording for the seek
rm -rf "$WORK/rec"
"$BIN" serve --config "$WORK/record.toml" --netns "$NS" --dev v0 --no-bpf >/dev/null 2>&1 &
pid=$!
sleep "$SEEK"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
echo "RESULT seek (busy recording): $(target/release/examples/seek "$WORK/rec" 20 | tr '\n' ' ')"
