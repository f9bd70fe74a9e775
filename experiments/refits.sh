#!/usr/bin/env bash
# Bucket refits under load, from a given profile. Each binary serves the 50/50 SST-2/AG News mix
# from PROFILE (a cached profile file, named as MORPH_HOME's profile cache names it: e.g. a 2 x 1
# int8 profile of all-MiniLM-L6-v2 that a first start measured earlier, NAME.measured.json), at
# each of RATES req/s for SECONDS, the binaries in turns. After each server: what it served, the
# refits that changed its buckets (/info's policy.bucket_refits), the buckets it replanned to,
# and the profile it refitted (kept in NAME.served.json) beside PROFILE and beside the profile the
# binary measured afresh on its own first start (where a refit should move towards).
# Each binary runs in a MORPH_HOME of its own under a temporary folder (the models linked from
# $MORPH_HOME, default ~/.cache/morph): its first start measures the profiles (the fresh one is
# kept), then PROFILE is written over its cache file, stamped with that binary's graph
# fingerprint so that it is read, and the refit an earlier turn kept is removed, before every turn.
#   experiments/refits.sh PROFILE "BIN [BIN...]" [RATES: 400,300,214] [SECONDS: 30] [TURNS: 2]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=$(realpath "$1")
read -r -a bins <<<"$2"
IFS=, read -r -a rates <<<"${3:-400,300,214}"
seconds=${4:-30}
turns=${5:-2}
home=${MORPH_HOME:-$HOME/.cache/morph}
corpora=(--corpus ../shared/data/text/sst2/dev.tsv --corpus ../shared/data/text/ag_news/train.csv)
tmp=$(mktemp -d)
server=""
stop() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; fi; }
trap 'stop; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
name=$(basename "$profile" .json)
name=${name%.measured}
cached() { echo "$tmp/home$1/profiles/$name.measured.json"; }
served() { echo "$tmp/home$1/profiles/$name.served.json"; }

# serve K LOG: binary K on its own home, until it answers /ready.
serve() {
  MORPH_HOME="$tmp/home$1" "${bins[$1]}" serve --port "$port" >"$2" 2>&1 &
  server=$!
  until curl -sf "127.0.0.1:$port/ready" >/dev/null; do
    kill -0 "$server" 2>/dev/null || { echo "server ${bins[$1]} exited: $2" >&2; exit 1; }
    sleep 1
  done
}

for k in "${!bins[@]}"; do
  mkdir -p "$tmp/home$k"
  ln -s "$home/models" "$tmp/home$k/models"
  [ -d "$home/onnxruntime" ] && ln -s "$home/onnxruntime" "$tmp/home$k/onnxruntime"
  serve "$k" "$tmp/first$k.log"
  stop
  [ -f "$(cached "$k")" ] || { echo "${bins[$k]} measured no $(basename "$profile")" >&2; exit 1; }
  cp "$(cached "$k")" "$tmp/fresh$k.json"
done

for turn in $(seq 1 "$turns"); do
  for k in "${!bins[@]}"; do
    python3 - "$profile" "$tmp/fresh$k.json" "$(cached "$k")" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["graph"] = json.load(open(sys.argv[2])).get("graph")
p.pop("served_batches", None)
json.dump(p, open(sys.argv[3], "w"))
PY
    rm -f "$(served "$k")"
    log="$tmp/turn$turn.$k.log"
    serve "$k" "$log"
    for rate in "${rates[@]}"; do
      "${bins[$k]}" bench --url "http://127.0.0.1:$port" "${corpora[@]}" --rate "$rate" --duration "$seconds" --json >"$tmp/run.json"
      refits=$(curl -s "127.0.0.1:$port/info" | python3 -c 'import json, sys; print(json.load(sys.stdin)["policy"].get("bucket_refits"))')
      python3 - "$tmp/run.json" "${bins[$k]}" "$turn" "$rate" "$refits" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
lat = r["latency"]
print(f"{sys.argv[2]} turn {sys.argv[3]} at {sys.argv[4]} req/s: served {r['throughput_rps']:.1f}, "
      f"refused {r['errors']}, p50 / p99 {lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} ms, bucket refits {sys.argv[5]}")
PY
    done
    stop
    grep -o 'buckets replanned.*' "$log" | sed 's/^/  /' || echo "  no bucket replanned"
    [ -f "$(served "$k")" ] || { echo "  no refit kept"; continue; }
    python3 - "$profile" "$(served "$k")" "$tmp/fresh$k.json" <<'PY'
import json, sys
given, refit, fresh = (json.load(open(f))["latency"] for f in sys.argv[1:])
print("  ms at batch x len: given -> refitted (measured afresh)")
for b in ["1", "4", "16"]:
    cells = [f"{b}x{l} {given[b][l]:.1f} -> {refit[b][l]:.1f} ({fresh[b][l]:.1f})" for l in ["8", "32", "64", "128"]]
    print("  " + ", ".join(cells))
PY
  done
done
