#!/usr/bin/env bash
# QUART in simulation at the paper's scale (8-stage BERT-21B, 12 servers × 4 slots):
#   cv        Fig. 7a/7b analogue: mean and p99 latency, SLO attainment and core-seconds by
#             input CV, QUART against INFless-, InferLine-, Cocktail-like and uniform scaling (and
#             the best baselines at QUART's core-seconds), as ratios
#   bursty    the same on an MMPP stream and the Azure trace stand-in
#   ablations each mechanism removed, the paper's printed forms, gains and period (CV 4, 2 seeds)
#   stages    Fig. 2a/2b analogue: measured arrival CV and queue per stage beside QNA's prediction
#   fig8      Fig. 8a/8b analogue at input CV 4: latency quantiles and queue length per policy,
#             with the CSVs and plots (latency CDF, queue over time, replicas and queue per stage)
#             left in experiments/out/quart_fig8/
#   experiments/quart.sh [cv|bursty|ablations|stages|fig8|all]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
which=${1:-all}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sim() { target/release/morph simulate --scenario "$1" --json >"$tmp/rows.json"; }

# Per run: mean and p99 latency, SLO, core-seconds (the cost: replicas × threads over time), and
# QUART's mean, p99 and core-seconds as ratios of each policy's (below 1: QUART lower).
table() {
  python3 - "$tmp/rows.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
by = {}
for r in rows:
    key = r["sweep"][1] if r["sweep"] else "-"
    by.setdefault(key, {})[r["policy"]] = r
print(f"{'point':>6} {'policy':<30} {'mean ms':>9} {'p99 ms':>9} {'SLO':>7} {'core·s':>8} {'quart mean /':>13} {'quart p99 /':>12} {'quart core·s /':>15}")
for point, p in by.items():
    q = p["quart"]
    for n, r in p.items():
        print(f"{point:>6} {n:<30} {r['mean_latency_ms']:>9.1f} {r['p99_latency_ms']:>9.1f} {100*r['slo_attainment']:>6.1f}% {r['core_seconds']:>8.0f}"
              f" {q['mean_latency_ms']/r['mean_latency_ms']:>13.2f} {q['p99_latency_ms']/r['p99_latency_ms']:>12.2f} {q['core_seconds']/r['core_seconds']:>15.2f}")
PY
}

if [ "$which" = cv ] || [ "$which" = all ]; then
  echo "== by input CV (assets/scenarios/quart_cv_sweep_gpu.toml)"
  sim assets/scenarios/quart_cv_sweep_gpu.toml
  table
fi

if [ "$which" = bursty ] || [ "$which" = all ]; then
  for scenario in quart_mmpp_gpu quart_trace_gpu; do
    echo "== assets/scenarios/$scenario.toml"
    sim "assets/scenarios/$scenario.toml"
    table
  done
fi

if [ "$which" = ablations ] || [ "$which" = all ]; then
  echo "== ablations at input CV 4 (assets/scenarios/quart_ablations_gpu.toml; mean over seeds)"
  sim assets/scenarios/quart_ablations_gpu.toml
  python3 - "$tmp/rows.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
agg = {}
for r in rows:
    a = agg.setdefault(r["policy"], [])
    a.append(r)
base = sum(r["mean_latency_ms"] for r in agg["quart"]) / len(agg["quart"])
print(f"{'variant':<18} {'mean ms':>9} {'p99 ms':>9} {'SLO':>7} {'slots':>6} {'cold':>5} {'warm':>5} {'mean / quart':>13}")
for name, rs in agg.items():
    m = lambda k: sum(r[k] for r in rs) / len(rs)
    print(f"{name:<18} {m('mean_latency_ms'):>9.1f} {m('p99_latency_ms'):>9.1f} {100*m('slo_attainment'):>6.1f}% {m('mean_instances'):>6.1f} {m('cold_starts'):>5.0f} {m('warm_starts'):>5.0f} {m('mean_latency_ms')/base:>13.2f}")
PY
fi

if [ "$which" = stages ] || [ "$which" = all ]; then
  echo "== per stage, one replica each (assets/scenarios/quart_stage_cv_gpu.toml)"
  sim assets/scenarios/quart_stage_cv_gpu.toml
  python3 - "$tmp/rows.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"{'input cv':>8} {'stage':>5} {'measured cv':>12} {'QNA cv':>8} {'mean queue':>11}")
for r in rows:
    g = r["gauge_means"]
    stages = sorted(int(k.split("=")[1].rstrip("}")) for k in g if k.startswith("stage_queue{"))
    for s in stages:
        key = lambda n: g.get(f"{n}{{stage={s}}}", float("nan"))
        print(f"{r['sweep'][1]:>8g} {s:>5} {key('stage_cv'):>12.3f} {key('stage_predicted_cv'):>8.3f} {key('stage_queue'):>11.2f}")
PY
fi

if [ "$which" = fig8 ] || [ "$which" = all ]; then
  echo "== Fig. 8 analogue at input CV 4 (assets/scenarios/quart_cv_sweep_gpu.toml, cv = 4)"
  out=experiments/out/quart_fig8
  rm -rf "$out"
  sed 's/^values = .*/values = [4.0]/' assets/scenarios/quart_cv_sweep_gpu.toml >"$tmp/cv4.toml"
  target/release/morph simulate --scenario "$tmp/cv4.toml" --out "$out" >/dev/null
  python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
cdf, queue = {}, {}
for r in csv.DictReader(open(f"{out}/latency_cdf.csv")):
    cdf.setdefault(r["policy"], {})[round(float(r["quantile"]), 3)] = float(r["latency_ms"])
for r in csv.DictReader(open(f"{out}/timeline.csv")):
    queue.setdefault(r["policy"], []).append(float(r["max_queue"]))
print(f"{'policy':<18} {'p50 ms':>8} {'p75 ms':>8} {'p90 ms':>8} {'p99 ms':>9} {'mean queue':>11} {'max queue':>10}  (queue: longest per second)")
for p, q in cdf.items():
    qs = queue.get(p, [0.0])
    print(f"{p:<18} {q[0.5]:>8.1f} {q[0.75]:>8.1f} {q[0.9]:>8.1f} {q[0.99]:>9.1f} {sum(qs) / len(qs):>11.1f} {max(qs):>10.0f}")
print(f"plots and CSVs: {out}/")
PY
fi
