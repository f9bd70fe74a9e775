#!/usr/bin/env bash
# SSJF live on SmolLM2-135M-Instruct (one decoder instance on llama.cpp's kernels, as `morph
# serve --task generate` runs it; continuous batching of 4, or no batching, or dynamic batching
# of 4 with a 500 ms wait): FCFS, SSJF with the built-in predictor, and oracle SJF (the recorded
# true lengths) on the same open-loop stream of held-out ShareGPT rounds (`morph bench --endpoint
# chat`, greedy, 256 tokens at most, as recorded by `morph train lengths --rounds heldout`; the
# stream takes each recorded round at most once while RATE x SECONDS stays within the 364
# rounds). Prints mean JCT, throughput, their ratios to the first policy's, the predictor's
# overhead (mean wait for a prediction) against mean JCT, and how fast the decoder ran in that
# run: mean ms of a decode iteration of 4 sequences (no prompt chunk), the mean tokens their KV
# caches held (a step's cost grows with them: `cargo bench -p morph-benches --bench
# decoder_latency` prices it), and seconds the decoder computed. Policy `fcfs-pred` is FCFS with
# the built-in predictor running but unused: what its encoder costs the decoder, apart from
# SSJF's order. Each policy's requests, one line each (send time, latency, status, usage: `morph
# bench --requests-out`), and the stream it sent (prompt and recorded answer lengths by index:
# `--trace-out`) stay in experiments/out/ssjf_live/.
#   experiments/ssjf_live.sh [RATES (comma separated, req/s)] [SECONDS of arrivals per run]
#                            [continuous|none|dynamic] [POLICIES (default "fcfs ssjf oracle";
#                            also fcfs-pred; the first is the one the ratios are to)]
set -euo pipefail
cd "$(dirname "$0")/.."
rates=${1:-0.2}
duration=${2:-150}
case ${3:-continuous} in
  continuous) batching='{"batching": {"mode": "continuous", "max_batch": 4}}' ;;
  none) batching='{"batching": {"mode": "none"}}' ;;
  dynamic) batching='{"batching": {"mode": "dynamic", "max_batch": 4, "wait_ms": 500}}' ;;
  *) echo "batching mode: continuous, none or dynamic" >&2; exit 2 ;;
esac
lengths=assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl
sharegpt=../shared/data/conversations/sharegpt.jsonl
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(mktemp -d)
out=experiments/out/ssjf_live
mkdir -p "$out"
server=""
trap '[ -n "$server" ] && kill -TERM $server 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
policies=${4:-fcfs ssjf oracle}
for kind in $policies; do
  case $kind in
    fcfs) args=(--policy fcfs --predictor none) ;;
    fcfs-pred) args=(--policy fcfs --predictor builtin) ;;
    ssjf) args=(--policy ssjf --predictor builtin) ;;
    oracle) args=(--policy ssjf --predictor oracle --oracle-lengths "$lengths" --sharegpt "$sharegpt") ;;
  esac
  # Prefilled as the recorded lengths were (`morph train lengths`' default), so that the
  # oracle's lengths are this server's true ones.
  "$bin" serve --task generate --port 0 --prefill-weights file "${args[@]}" --policy-params "$batching" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
  url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
  [ -n "$url" ] || { cat "$tmp/serve.err"; exit 1; }
  "$bin" bench --url "$url" --endpoint chat --lengths "$lengths" --sharegpt "$sharegpt" \
    --rate "$rates" --duration "$duration" --timeout 3600 --json \
    --requests-out "$out/$kind.requests.jsonl" --trace-out "$out/$kind.trace.jsonl" >"$tmp/$kind.json"
  curl -s "$url/metrics" >"$tmp/$kind.metrics"
  kill -TERM "$server"; wait "$server" || true; server=""
done
python3 - "$tmp" $policies <<'PY'
import json, sys
d = sys.argv[1]
runs = {k: json.load(open(f"{d}/{k}.json")) for k in sys.argv[2:]}
def metric(k, name, labels=None):
    """Sum of the samples of `name` (with exactly `labels`, if given) in run k's /metrics."""
    total = 0.0
    for line in open(f"{d}/{k}.metrics"):
        series, _, value = line.rpartition(" ")
        base, _, rest = series.partition("{")
        if base == name and (labels is None or rest.rstrip("}") == labels):
            total += float(value)
    return total
def mean_ms(k, name, labels=None):
    return metric(k, name + "_sum", labels) / max(metric(k, name + "_count", labels), 1) * 1e3
pred = {k: mean_ms(k, "morph_prediction_seconds") for k in runs}
four = 'sequences="4",prefill="false"'
step4 = {k: mean_ms(k, "morph_decode_iteration_seconds", four) for k in runs}
ctx4 = {k: metric(k, "morph_decode_iteration_context_tokens_total", four)
        / max(metric(k, "morph_decode_iteration_seconds_count", four), 1) for k in runs}
busy = {k: metric(k, "morph_decode_iteration_seconds_sum") for k in runs}
first = sys.argv[2]
print(f"{'rate/s':>7} {'policy':<9} {'sent':>5} {'err':>4} {'mean JCT s':>11} {'p50 s':>7} {'p99 s':>7} {'thr req/s':>10} {'JCT/'+first:>11} {'thr/'+first:>11} {'pred ms':>8} {'pred/JCT':>9} {'step@4 ms':>10} {'ctx@4':>6} {'decoding s':>11}")
for i, base in enumerate(next(iter(runs.values()))):
    for k, rs in runs.items():
        r = rs[i]
        lat = r["latency"]
        jct = lat["mean_ms"] / 1e3
        print(f"{r['offered_rps']:>7.2f} {k:<9} {r['sent']:>5} {r['errors']:>4} {jct:>11.1f} {lat['p50_ms']/1e3:>7.1f} {lat['p99_ms']/1e3:>7.1f} "
              f"{r['throughput_rps']:>10.3f} {lat['mean_ms']/base['latency']['mean_ms']:>11.2f} {r['throughput_rps']/base['throughput_rps']:>11.2f} "
              f"{pred[k]:>8.1f} {pred[k]/lat['mean_ms']*100 if lat['mean_ms'] else 0:>8.2f}% {step4[k]:>10.1f} {ctx4[k]:>6.0f} {busy[k]:>11.0f}")
print("(oracle: 'pred ms' is the lookup of the recorded length; ssjf, fcfs-pred: the predictor's encoder and head;")
print(" ctx@4: mean tokens in the KV caches of a step of 4; pred ms, step@4 ms, ctx@4 and decoding s are over all rates")
print(" of a policy)")
PY
