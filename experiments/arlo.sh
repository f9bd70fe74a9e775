#!/usr/bin/env bash
# Arlo's experiments in simulation, each printing its table (see the comments at the top of
# each scenario file for what it reproduces):
#   experiments/arlo.sh [fig6|fig10|fig11|table4|fig8|all] [--out DIR]
# Fig. 6/7 (10 instances, load sweep), Fig. 10 (bursty, 90 and 300 instances), Fig. 11 (2/4/8/16
# runtimes), Table 4 (dispatchers), Fig. 8 (autoscaling, time-weighted instance count).
# With --out DIR each experiment also writes its CSVs and SVG plots under DIR/NAME.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
out=""
[ "${2:-}" = "--out" ] && out=${3:?"--out needs a directory"}
cargo build --release -q -p morph-cli
declare -A files=(
  [fig6]="assets/scenarios/arlo_fig6_gpu.toml"
  [fig10]="assets/scenarios/arlo_fig10_90_gpu.toml assets/scenarios/arlo_fig10_300_gpu.toml"
  [fig11]="assets/scenarios/arlo_fig11_runtimes_gpu.toml"
  [table4]="assets/scenarios/arlo_table4_dispatch_gpu.toml"
  [fig8]="assets/scenarios/arlo_fig8_autoscale_gpu.toml"
)
names=(fig6 fig10 fig11 table4 fig8)
[ "$which" != all ] && names=("$which")
for name in "${names[@]}"; do
  for scenario in ${files[$name]:?"unknown experiment $name (fig6|fig10|fig11|table4|fig8|all)"}; do
    args=(--scenario "$scenario")
    [ -n "$out" ] && args+=(--out "$out/$(basename "$scenario" .toml)")
    target/release/morph simulate "${args[@]}"
    echo
  done
done
