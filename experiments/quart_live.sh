#!/usr/bin/env bash
# QUART live, on this machine (see docs/quart.md).
#   stages:   Fig. 2a/2b analogue. all-MiniLM-L6-v2 in 3 stages, each stage one worker process
#             (QUART held at one replica, one thread), Gamma arrivals at input CV 0.1 / 1 / 4:
#             per stage the measured inter-arrival CV beside QNA's prediction, and the mean queue
#             length (sampled from /metrics every 0.25 s).
#   cv:       Fig. 7 analogue. A 40 ms emulated model in 4 stages of 10 ms on 16 slots, 150
#             req/s, input CV 1 and 4: QUART and the four baselines (INFless-like runs the whole
#             40 ms model per replica) on the same stream; mean/p75/p99 latency, SLO attainment
#             and goodput at 3x the inference time (120 ms).
#   bursty:   Fig. 6 analogue. The same pipeline under the Azure LLM 2023 conversation arrivals
#             (../shared/data/traces, 25x faster: ~140 req/s with its bursts); they stand in for
#             the paper's Azure Functions trace.
#   decoder:  SmolLM2-135M's prefill in 5 stages of 6 layers, every replica a worker process, 8
#             slots, one greedy token per SST-2 sentence at 4 req/s, input CV 1 and 4: QUART and
#             the baselines (INFless-like: whole-model prefill replicas), SLO 1 s.
#   experiments/quart_live.sh [stages|cv|bursty|decoder|all] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
secs=${2:-20}
. experiments/live_server.sh
# Samples the policy's stage gauges every 0.25 s while the PID in $1 runs.
sample() {
  while kill -0 "$1" 2>/dev/null; do
    curl -s "$url/metrics" | grep '^morph_policy_stage_' >>"$tmp/samples.txt" || true
    echo "--" >>"$tmp/samples.txt"
    sleep 0.25
  done
}
corpus=../shared/data/text/sst2/dev.tsv

if [ "$what" = stages ] || [ "$what" = all ]; then
  for cv in 0.1 1 4; do
    serve --engine ort --stages 3 --workers process --runtime dynamic:128x1 --instances 3 \
      --policy quart --slo-ms 1000 --policy-params '{"r_max": 1, "compensator": false, "cv_enough": 1000000000}'
    : >"$tmp/samples.txt"
    "$bin" bench --url "$url" --corpus "$corpus" --rate 60 --cv "$cv" --duration "$secs" --json >"$tmp/bench.json" &
    bench=$!
    sample "$bench"
    wait "$bench"
    curl -s "$url/metrics" | grep '^morph_policy_stage_' >"$tmp/final.txt"
    python3 - "$tmp" "$cv" <<'PY'
import json, re, sys
d, cv = sys.argv[1], sys.argv[2]
def parse(lines):
    out = {}
    for l in lines:
        m = re.match(r'morph_policy_(stage_\w+)\{stage="(\d+)"\} (\S+)', l)
        if m: out[(m[1], int(m[2]))] = float(m[3])
    return out
final = parse(open(f"{d}/final.txt"))
samples = [parse(s.splitlines()) for s in open(f"{d}/samples.txt").read().split("--\n") if s.strip()]
bench = json.load(open(f"{d}/bench.json"))[0]
for k in range(3):
    q = [s.get(("stage_queue", k), 0.0) for s in samples]
    print(f"input CV {cv:>4}  stage {k}  measured CV {final.get(('stage_cv', k), float('nan')):5.2f}  "
          f"QNA CV {final.get(('stage_predicted_cv', k), float('nan')):5.2f}  mean queue {sum(q) / max(len(q), 1):6.2f}  "
          f"(p99 {bench['latency']['p99_ms']:.0f} ms over {bench['ok']} calls)")
PY
    stop
  done
fi

# pipeline_runs LABEL SLO_MS BENCH_ARGS...: QUART and the four baselines in turn, each on a
# fresh server of "${model[@]}", under the same request stream; one table per bench run.
pipeline_runs() {
  local label=$1 slo=$2; shift 2
  for policy in quart cocktail-like inferline-like infless-like uniform-pipeline; do
    serve "${model[@]}" --policy "$policy" --slo-ms "$slo"
    "$bin" bench --url "$url" --corpus "$corpus" --slo-ms "$slo" --json "$@" >"$tmp/$label.$policy.json"
    stop
  done
  python3 - "$tmp" "$label" <<'PY'
import json, sys
d, label = sys.argv[1], sys.argv[2]
policies = ["quart", "cocktail-like", "inferline-like", "infless-like", "uniform-pipeline"]
runs = {p: json.load(open(f"{d}/{label}.{p}.json")) for p in policies}
for i in range(len(runs["quart"])):
    print(f"{label} run {i + 1}: {'policy':<17} {'mean ms':>8} {'p75 ms':>8} {'p99 ms':>8} {'in SLO':>7} {'goodput/s':>10} {'quart / this':>13}")
    q = runs["quart"][i]["latency"]["mean_ms"]
    for p in policies:
        r = runs[p][i]
        l = r["latency"]
        print(f"{'':<{len(label) + 8}} {p:<17} {l['mean_ms']:>8.1f} {r['p75_ms']:>8.1f} {l['p99_ms']:>8.1f} "
              f"{100 * r['within_slo']:>6.1f}% {r['goodput_rps']:>10.1f} {q / l['mean_ms']:>12.2f}x")
PY
}

printf '{"model":"flat-40ms","latency":{"1":{"1":40.0,"512":40.0}}}' >"$tmp/stage.json"
model=(--engine emulated --profile "$tmp/stage.json" --emulated-dim 8 --stages 4 --instances 16 --runtime dynamic:512x1)
if [ "$what" = cv ] || [ "$what" = all ]; then
  pipeline_runs cv 120 --rate 150 --cv 1,4 --duration "$secs"
fi
if [ "$what" = bursty ] || [ "$what" = all ]; then
  pipeline_runs bursty 120 --trace ../shared/data/traces/azure_llm_2023_conv.csv --speedup 25 --duration "$secs"
fi
if [ "$what" = decoder ] || [ "$what" = all ]; then
  model=(--task generate --stages 5 --workers process --instances 8 --runtime dynamic:256x1)
  pipeline_runs decoder 1000 --endpoint prefill --rate 4 --cv 1,4 --duration "$secs"
fi
