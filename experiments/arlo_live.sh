#!/usr/bin/env bash
# Arlo and its baselines live: for each policy of a scenario, `morph serve --policy P` on the
# scenario's instances and profile, the scenario's request stream replayed by `morph bench`,
# then the server stopped; the same stream simulated alongside. Prints one table.
#   experiments/arlo_live.sh [SCENARIO] [--real]
# Without --real the instances are emulated (they sleep the profile's latency); with --real
# they are candle instances of the default model (keep --instances within the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-assets/scenarios/arlo_live_emulated.toml}
real=${2:-}
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -TERM $server 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
python3 - "$scenario" >"$tmp/plan" <<'PY'
import json, os, sys, tomllib
s = tomllib.load(open(sys.argv[1], "rb"))
c = s["cluster"]
profile = os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), c["profile"]))
for p in s["policies"]:
    params = {k: v for k, v in p.items() if k != "name"}
    print(p["name"], c["instances"], profile, s["slo_ms"], json.dumps(params, separators=(",", ":")))
PY
"$bin" simulate --scenario "$scenario" --json >"$tmp/sim.json"
i=0
while read -r policy instances profile slo params; do
  engine=(--engine emulated)
  [ "$real" = "--real" ] && engine=(--engine candle)
  "$bin" serve --port 0 "${engine[@]}" --profile "$profile" --instances "$instances" --policy "$policy" \
    --policy-params "$params" --slo-ms "$slo" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  for _ in $(seq 300); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
  url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
  [ -n "$url" ] || { cat "$tmp/serve.err"; exit 1; }
  "$bin" bench --url "$url" --scenario "$scenario" --json >"$tmp/live.$i.json"
  curl -s "$url/info" >"$tmp/info.$i.json"
  kill -TERM "$server"; wait "$server" || true; server=""
  i=$((i + 1))
done <"$tmp/plan"
python3 - "$tmp" "$i" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
sim = json.load(open(f"{d}/sim.json"))
print(f"{'policy':<10} {'sent':>6} {'err':>4} {'live mean':>10} {'p50':>8} {'p98':>8} {'p99':>8} {'sim mean':>9} {'sim p98':>8}  live instances at the end")
for k in range(n):
    live = json.load(open(f"{d}/live.{k}.json"))[0]
    info = json.load(open(f"{d}/info.{k}.json"))
    s = sim[k]
    lat = live["latency"]
    counts = ", ".join(f"{r['runtime']}x{r['instances']}" for r in info["runtimes"])
    print(f"{s['policy']:<10} {live['sent']:>6} {live['errors']:>4} {lat['mean_ms']:>10.2f} {lat['p50_ms']:>8.2f} "
          f"{lat['p98_ms']:>8.2f} {lat['p99_ms']:>8.2f} {s['mean_latency_ms']:>9.2f} {s['p98_latency_ms']:>8.2f}  {counts}")
PY
