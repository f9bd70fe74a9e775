#!/usr/bin/env bash
# SSJF in simulation: FCFS, SSJF with predictions carrying the trained predictor's measured
# error (lognormal), and oracle SJF, on the LMSYS lengths with the measured SmolLM2 cost, by
# request rate (Fig. 4), by burstiness (Fig. 5) and by batch size (Fig. 8), and by rate on the
# Azure conversation trace and the creation trace. Prints mean JCTs and their ratios.
#   experiments/ssjf.sh [rate|cv|batch|azure|creation|all]
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
    name, _, variant = r["policy"].partition(" (")
    order, mode = name.split("/")
    kind = "oracle" if variant.startswith("oracle") else order
    point = "{}={:g}".format(*r["sweep"]) if r.get("sweep") else "-"
    by.setdefault((point, mode), {})[kind] = r
print(f"{'point':<10} {'mode':<16} {'fcfs JCT s':>11} {'ssjf JCT s':>11} {'oracle s':>9} {'ssjf/fcfs':>10} {'ssjf/oracle':>12} {'oracle/fcfs':>12}")
for (point, mode), p in by.items():
    jct = {k: v["mean_latency_ms"] / 1e3 for k, v in p.items()}
    f, s, o = jct.get("fcfs", float("nan")), jct.get("ssjf", float("nan")), jct.get("oracle", float("nan"))
    print(f"{point:<10} {mode:<16} {f:>11.1f} {s:>11.1f} {o:>9.1f} {s / f:>10.2f} {s / o:>12.2f} {o / f:>12.2f}")
PY
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ "$which" = rate ] || [ "$which" = all ] && { echo "== by request rate"; run assets/scenarios/ssjf_lmsys_cpu.toml; }
[ "$which" = cv ] || [ "$which" = all ] && { echo "== by burstiness (gamma CV)"; run assets/scenarios/ssjf_lmsys_burstiness_cpu.toml; }
[ "$which" = batch ] || [ "$which" = all ] && { echo "== by batch size"; run assets/scenarios/ssjf_lmsys_batch_size_cpu.toml; }
[ "$which" = azure ] || [ "$which" = all ] && { echo "== Azure conversation trace, by rate"; run assets/scenarios/ssjf_azure_conv_cpu.toml; }
[ "$which" = creation ] || [ "$which" = all ] && { echo "== creation trace, by rate"; run assets/scenarios/ssjf_creation_cpu.toml; }
exit 0
