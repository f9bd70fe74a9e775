#!/usr/bin/env bash
# ONNX Runtime against candle, live: `morph serve --engine ort` and `--engine candle` (one
# dynamic:512x32 instance, dynamic batching) take the same request stream from `morph bench`.
# A sweep of Poisson rates (8 s each) finds the saturation throughput: the highest rate served
# with no errors and p99 under 1 s (past it the queue grows without bound). Then a 20 s run at
# 80% of each engine's own saturation gives its p99.
# Both run fp32 graphs (ONNX Runtime's default is int8), so that the engines are compared.
#   experiments/engines_live.sh [CORPUS] [RATES]
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-../shared/data/text/ag_news/train.csv}
rates=${2:-10,20,30,40,50,60,80,100,120,140,160}
. experiments/live_server.sh
for engine in ort candle; do
  serve --engine "$engine" --dtype fp32 --runtime dynamic:512x32 --max-queue 4096
  "$bin" bench --url "$url" --corpus "$corpus" --rate "$rates" --duration 8 --json >"$tmp/$engine.sweep.json"
  rate=$(python3 - "$tmp/$engine.sweep.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
kept_up = [r for r in runs if r["errors"] == 0 and r["latency"]["p99_ms"] < 1000]
sat = max((r["offered_rps"] for r in kept_up), default=runs[0]["offered_rps"])
json.dump({"saturation_rps": sat, "sweep": runs}, open(sys.argv[1] + ".sat", "w"))
print(round(0.8 * sat, 1))
PY
)
  "$bin" bench --url "$url" --corpus "$corpus" --rate "$rate" --duration 20 --json >"$tmp/$engine.p99.json"
  stop
done
python3 - "$tmp" "$corpus" <<'PY'
import json, sys
d, corpus = sys.argv[1], sys.argv[2]
r = {e: (json.load(open(f"{d}/{e}.sweep.json.sat")), json.load(open(f"{d}/{e}.p99.json"))[0]) for e in ("ort", "candle")}
print(f"live, one dynamic:512x32 instance, dynamic batching, corpus {corpus}")
print("sweep, p99 ms by offered rate:")
for e, (sat, _) in r.items():
    print(f"  {e:<7} " + "  ".join(f"{s['offered_rps']:.0f}:{s['latency']['p99_ms']:.0f}" + ("!" if s["errors"] else "") for s in sat["sweep"]))
print(f"{'engine':<8} {'saturation rps':>15} {'80% rate':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
for e, (sat, p) in r.items():
    print(f"{e:<8} {sat['saturation_rps']:>15.1f} {p['offered_rps']:>9.1f} {p['latency']['p50_ms']:>8.1f} {p['latency']['p99_ms']:>8.1f} {p['errors']:>7}")
(os_, op), (cs, cp) = r["ort"], r["candle"]
print(f"ort/candle saturation throughput {os_['saturation_rps'] / cs['saturation_rps']:.2f}x; "
      f"p99 at 80% of each one's saturation: ort {op['latency']['p99_ms']:.0f} ms, candle {cp['latency']['p99_ms']:.0f} ms")
PY
