#!/usr/bin/env bash
# Names on LibreQoS's layout (benches/big_tree.sh's libreqos_tree): a queuingStructure.json,
# ShapedDevices.csv and lqos.conf written in LibreQoS's layouts for every site, access point and
# circuit of the tree, then `dump` (text and --json) and `check --json` with and without those
# names: wall time and peak RSS of each, and the names' share. Needs root.
#
# Usage: [TCMON=BIN] benches/names_libreqos.sh [CIRCUITS] [QUEUES]   (defaults 50000 and 4)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/big_tree.sh
CIRCUITS=${1:-50000}
QUEUES=${2:-4}
[ "$(id -u)" = 0 ] || { echo "SKIPPED names_libreqos: needs root"; exit 0; }
# TCMON=path: that binary (e.g. an earlier build, to compare), not this tree's release build
if [ -z "${TCMON:-}" ]; then
  cargo build --release --quiet --bin tcmon
  TCMON=${CARGO_TARGET_DIR:-$PWD/target}/release/tcmon
fi
NS=tcmon-bench-names-$$
DIR=$(mktemp -d)
trap 'ip netns del "$NS" 2>/dev/null || true; rm -rf "$DIR"' EXIT
libreqos_tree "$NS" "$CIRCUITS" "$QUEUES"
python3 - "$DIR" "$CIRCUITS" "$QUEUES" <<'PY'
import csv, json, os, sys
d, circuits, queues = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_q = (circuits + queues - 1) // queues
network, rows, n = {}, [], 0
for q in range(1, queues + 1):
    minor = 3
    for c in range(per_q):
        if c % 200 == 0:
            site = {"classid": f"{q:#x}:{minor:#x}", "up_classid": f"{q:#x}:{minor:#x}",
                    "parentClassID": f"{q:#x}:0x1", "downloadBandwidthMbps": 10000,
                    "uploadBandwidthMbps": 10000, "children": {}}
            network[f"Site_{q}_{c // 200}"] = site
            minor += 1
        if c % 20 == 0:
            ap_name = f"AP_{q}_{c // 20}"
            ap = {"classid": f"{q:#x}:{minor:#x}", "up_classid": f"{q:#x}:{minor:#x}",
                  "downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "circuits": []}
            site["children"][ap_name] = ap
            minor += 1
        n += 1
        cid, ip = str(100000 + n), f"10.{q}.{c // 250}.{c % 250 + 1}"
        ap["circuits"].append({
            "maxDownload": 100, "maxUpload": 20, "minDownload": 5, "minUpload": 1,
            "circuitID": cid, "circuitName": f"Subscriber {n}, {n} Oak St", "ParentNode": ap_name,
            "devices": [{"deviceID": f"{cid}-1", "deviceName": f"cpe-{n}", "mac": "",
                         "ipv4s": [ip], "ipv6s": [], "comment": ""}],
            "classid": f"{q:#x}:{minor:#x}", "up_classid": f"{q:#x}:{minor:#x}",
            "classMajor": f"{q:#x}", "up_classMajor": f"{q:#x}", "classMinor": f"{minor:#x}",
            "comment": ""})
        rows.append([cid, f"Subscriber {n}, {n} Oak St", f"{cid}-1", f"cpe-{n}", ap_name, "",
                     ip, "", 5, 1, 100, 20, ""])
        minor += 1
os.makedirs(f"{d}/state/shaping", exist_ok=True)
os.makedirs(f"{d}/src", exist_ok=True)
with open(f"{d}/state/shaping/queuingStructure.json", "w") as f:
    json.dump({"Network": network, "lastUsedClassIDCounterByCPU": {}, "generatedPNs": []}, f, indent=4)
with open(f"{d}/src/ShapedDevices.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["Circuit ID", "Circuit Name", "Device ID", "Device Name", "Parent Node", "MAC",
                "IPv4", "IPv6", "Download Min Mbps", "Upload Min Mbps", "Download Max Mbps",
                "Upload Max Mbps", "Comment"])
    w.writerows(rows)
with open(f"{d}/lqos.conf", "w") as f:
    f.write(f'lqos_directory = "{d}/src"\nstate_directory = "{d}/state"\n'
            '[bridge]\nto_network = "v0"\nto_internet = "v1"\n')
PY
printf '[names]\ntc_cls = []\nlqos_conf = "%s/lqos.conf"\n' "$DIR" >"$DIR/named.toml"
printf '[names]\ntc_cls = []\nlqos_conf = ""\n' >"$DIR/plain.toml"
size=$(du -k "$DIR/state/shaping/queuingStructure.json" | cut -f1)
named=$("$TCMON" dump --config "$DIR/named.toml" --netns "$NS" --dev v0 | grep -c " circuit '" || true)
echo "LibreQoS layout: $CIRCUITS circuits over $QUEUES TX queues; queuingStructure.json $((size / 1024)) MB; $named circuits named in dump"
# best of 3: wall ms and peak RSS MB
measure() {
  local best=999999 peak=0 t0 t1 ms out
  for _ in 1 2 3; do
    t0=$(date +%s%N)
    out=$({ /usr/bin/time -f 'PEAK %M' "$TCMON" "$@" >/dev/null || true; } 2>&1)
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    [ "$ms" -lt "$best" ] && best=$ms
    peak=$(echo "$out" | awk '/^PEAK/ {printf "%.1f", $2 / 1024}')
  done
  echo "$best ms, peak $peak MB"
}
# loading alone: lo has no classes to join
echo "loading the names: without $(measure dump --config "$DIR/plain.toml" --dev lo); with $(measure dump --config "$DIR/named.toml" --dev lo)"
for what in "dump" "dump --json" "check --json --window 100ms"; do
  # shellcheck disable=SC2086
  a=$(measure $what --config "$DIR/plain.toml" --netns "$NS" --dev v0)
  # shellcheck disable=SC2086
  b=$(measure $what --config "$DIR/named.toml" --netns "$NS" --dev v0)
  echo "$what: without names $a; with names $b"
done
