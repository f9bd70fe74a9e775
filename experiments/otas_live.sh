#!/usr/bin/env bash
# OTAS live beside the simulator (issue 15): for each scenario given, and for OTAS over its plan
# list and a baseline, serve the encoder with that policy, replay the scenario's request stream
# against POST /v1/classify with `morph bench --endpoint classify` (the profiled test examples'
# texts, their SLOs and utilities), then simulate the same stream. Prints both accounts.
#
#   experiments/otas_live.sh [SECONDS] [SCENARIO...]
#
# OTAS_ENCODER=minilm (the default): all-MiniLM-L6-v2 with the built-in heads, OTAS over the
# Pareto plans against PetS-like, on the MAF-like and the synthetic fluctuating load.
# OTAS_ENCODER=mpnet: all-mpnet-base-v2 with the heads in assets/weights/tasks_mpnet (fp32, as
# profiled), OTAS over its Pareto plans and the plain model against fixed exit:6 (the best fixed
# plan), on the synthetic load (docs/otas.md). MPNET is the model's directory, which must be
# named all-mpnet-base-v2 as the heads say (default: the copy Morph's tests fetch into
# MORPH_HOME; a download of the hub's sentence-transformers/all-mpnet-base-v2 does as well).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
shift || true
morph=./target/release/morph
data=../shared/data/text
case ${OTAS_ENCODER:-minilm} in
  minilm)
    default_scenarios='assets/scenarios/otas_maf_like_cpu.toml assets/scenarios/otas_synthetic_cpu.toml'
    encoder=(--plan-profiles assets/profiles/otas)
    plans='exit:1,exit:3,exit:4,exit:5,prompt-replace:2,prompt:2'
    runs=('otas|{"plans": ["exit:1", "exit:3", "exit:4", "exit:5", "prompt-replace:2", "prompt:2"], "rate_len": 96}'
          'pets-like|{}')
    simulated='^(policy|pets-like |otas \(pareto\) )' ;;
  mpnet)
    default_scenarios='assets/scenarios/otas_synthetic_mpnet_cpu.toml'
    encoder=(--model "${MPNET:-${MORPH_HOME:-$HOME/.cache/morph}/models/all-mpnet-base-v2}" --task-heads assets/weights/tasks_mpnet --dtype fp32
             --plan-profiles assets/profiles/otas_mpnet)
    plans='exit:2,exit:4,exit:6'
    runs=('otas|{"plans": ["exit:2", "exit:4", "exit:6", "plain"]}' 'pets-like|{"plans": ["exit:6"]}')
    simulated='^(policy|otas \(pareto, plain\)|fixed exit:6)' ;;
  *) echo "OTAS_ENCODER is minilm or mpnet" >&2; exit 2 ;;
esac
scenarios=("${@:-$default_scenarios}")
for scenario in ${scenarios[@]}; do
  for run in "${runs[@]}"; do
    policy=${run%%|*}
    params=${run#*|}
    $morph serve --port 0 "${encoder[@]}" --engine ort --runtime dynamic:128x32 --plans=$plans --policy $policy \
      --policy-params "$params" > /tmp/otas_live_serve.out 2>/dev/null &
    server=$!
    for _ in $(seq 600); do grep -q listening /tmp/otas_live_serve.out 2>/dev/null && break; sleep 0.2; done
    url=$(sed -n 's/^morph listening on //p' /tmp/otas_live_serve.out)
    echo "== live: $policy $params on $scenario, $seconds s"
    $morph bench --url "$url" --endpoint classify --scenario "$scenario" --data $data --duration "$seconds"
    kill -TERM $server
    wait $server || true
  done
  echo "== simulated: the same stream"
  $morph simulate --scenario "$scenario" --duration "$seconds" | sed -n '/utility/,$p' | grep -E "$simulated"
done
