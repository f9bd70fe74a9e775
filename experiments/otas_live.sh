#!/usr/bin/env bash
# OTAS live beside the simulator (issue 15): for each scenario given (default: the MAF-like and
# the synthetic fluctuating load), and for OTAS over the Pareto plans and the PetS-like
# baseline, serve all-MiniLM-L6-v2 with that policy, replay the scenario's request stream
# against POST /v1/classify with `morph bench --endpoint classify` (the profiled test examples'
# texts, their SLOs and utilities), then simulate the same stream. Prints both accounts.
#
#   experiments/otas_live.sh [SECONDS] [SCENARIO...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
shift || true
scenarios=("${@:-assets/scenarios/otas_maf_like_cpu.toml assets/scenarios/otas_synthetic_cpu.toml}")
morph=./target/release/morph
data=../shared/data/text
plans='exit:1,exit:3,exit:4,exit:5,prompt-replace:2,prompt:2'
for scenario in ${scenarios[@]}; do
  for policy in otas pets-like; do
    params='{}'
    [ "$policy" = otas ] && params='{"plans": ["exit:1", "exit:3", "exit:4", "exit:5", "prompt-replace:2", "prompt:2"], "rate_len": 96}'
    $morph serve --port 0 --engine ort --runtime dynamic:128x32 --plans=$plans --policy $policy \
      --policy-params "$params" --plan-profiles assets/profiles/otas > /tmp/otas_live_serve.out 2>/dev/null &
    server=$!
    for _ in $(seq 100); do grep -q listening /tmp/otas_live_serve.out 2>/dev/null && break; sleep 0.2; done
    url=$(sed -n 's/^morph listening on //p' /tmp/otas_live_serve.out)
    echo "== live: $policy on $scenario, $seconds s"
    $morph bench --url "$url" --endpoint classify --scenario "$scenario" --data $data --duration "$seconds"
    kill -TERM $server
    wait $server || true
  done
  echo "== simulated: the same stream"
  $morph simulate --scenario "$scenario" --duration "$seconds" | sed -n '/utility/,$p' | grep -E "^(policy|pets-like |otas \(pareto\) )"
done
