#!/usr/bin/env bash
# How much one live SSJF run can say (assets/scenarios/ssjf_live_spread_cpu.toml): simulates the live
# setting of `ssjf_live.sh 0.27 760 continuous` on 40 arrival streams, each policy on the same
# stream, and prints the spread across streams of FCFS's mean JCT and of each policy's mean JCT
# over FCFS's (median, 10th and 90th percentiles, extremes) with the median p99.
#   experiments/ssjf_live_spread.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
target/release/morph simulate --scenario assets/scenarios/ssjf_live_spread_cpu.toml --json >"$runs"
python3 - "$runs" <<'PY'
import json, statistics, sys
runs = {}
for r in json.load(open(sys.argv[1])):
    runs.setdefault(r["seed"], {})[r["policy"].split(" ")[0]] = r
policies = list(next(iter(runs.values())))
first = policies[0]
def spread(values):
    v = sorted(values)
    cells = [statistics.median(v), v[len(v) // 10], v[9 * len(v) // 10], v[0], v[-1]]
    return " ".join(f"{c:>7.2f}" for c in cells)
def p99(p):
    return statistics.median(r[p]["p99_latency_ms"] / 1e3 for r in runs.values())
print(f"{len(runs)} streams of the same length; per stream, every policy on it")
print(f"{'':<26} {'median':>7} {'10%':>7} {'90%':>7} {'min':>7} {'max':>7} {'p99 s (median)':>15}")
print(f"{first + ' mean JCT s':<26} {spread(r[first]['mean_latency_ms'] / 1e3 for r in runs.values())} {p99(first):>15.0f}")
for p in policies[1:]:
    ratios = [r[p]["mean_latency_ms"] / r[first]["mean_latency_ms"] for r in runs.values()]
    print(f"{p + ' / ' + first:<26} {spread(ratios)} {p99(p):>15.0f}")
PY
