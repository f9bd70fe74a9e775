#!/usr/bin/env bash
# SSJF in simulation: FCFS against oracle shortest-job-first on the LMSYS lengths with the
# measured SmolLM2 cost, by request rate (Fig. 4/6), by burstiness (Fig. 5/7) and by batch size
# (Fig. 8). Prints mean JCT and throughput per policy and the SJF/FCFS JCT ratio.
#   experiments/ssjf.sh [rate|cv|batch|all]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
which=${1:-all}
run() {
  target/release/morph simulate --scenario "$1" --json >"$tmp/rows.json"
  python3 - "$tmp/rows.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
by = {}
for r in rows:
    order, mode = r["policy"].replace(" (oracle)", "").split("/")
    point = "{}={:g}".format(*r["sweep"]) if r.get("sweep") else "-"
    by.setdefault((point, mode), {})[order] = r
print(f"{'point':<10} {'mode':<16} {'fcfs JCT s':>11} {'sjf JCT s':>10} {'sjf/fcfs':>9} {'fcfs thr/s':>11} {'sjf thr/s':>10}")
for (point, mode), p in by.items():
    f, s = p["fcfs"], p["ssjf"]
    fj, sj = f["mean_latency_ms"] / 1e3, s["mean_latency_ms"] / 1e3
    print(f"{point:<10} {mode:<16} {fj:>11.1f} {sj:>10.1f} {sj / fj:>9.2f} {f['throughput_rps']:>11.3f} {s['throughput_rps']:>10.3f}")
PY
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "$which" = rate ] || [ "$which" = all ] && { echo "== by request rate"; run scenarios/ssjf_lmsys_cpu.toml; }
[ "$which" = cv ] || [ "$which" = all ] && { echo "== by burstiness (gamma CV)"; run scenarios/ssjf_lmsys_burstiness_cpu.toml; }
[ "$which" = batch ] || [ "$which" = all ] && { echo "== by batch size"; run scenarios/ssjf_lmsys_batch_size_cpu.toml; }
exit 0
