#!/usr/bin/env bash
# Simulator fidelity for generation (issue 19): one SSJF stream of held-out ShareGPT rounds
# (prompts of varied length, answers of their recorded greedy length) served live by
# `morph serve --task generate` (SmolLM2-135M, oracle SJF, so both sides order alike) and
# replayed by `morph simulate` from the trace `morph bench --trace-out` wrote: the same arrival
# times, prompt tokens and output tokens, priced by the generation cost model (prefill by prompt
# tokens, K(b) per decode step; see `cargo bench -p morph-benches --bench decoder_latency`).
#   experiments/fidelity_generation.sh [RATE req/s] [SECONDS of arrivals] [continuous|none|dynamic]
#                                      [GENERATION (the scenario's cluster.generation table)]
# The stream, the live results and the live server's token timings stay in
# experiments/out/fidelity_generation/; with REPLAY=1 the script skips the live run and only
# simulates that stream again (with another GENERATION table, say).
# Goal: simulated mean JCT within 10% of live, p99 within 20%.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-0.1}
duration=${2:-300}
mode=${3:-continuous}
# Default: `decoder_latency` as measured on the 2-core host on 2026-11-23 (context 128, median of 5).
generation=${4:-'{ prefill_ms = { "32" = 131.5, "128" = 410.5, "512" = 1590.8, "1024" = 4006.5 }, k_ms = { "1" = 40.6, "2" = 75.9, "4" = 99.3, "8" = 129.3, "16" = 171.1 } }'}
case $mode in
  continuous) batching='{"batching": {"mode": "continuous", "max_batch": 4}}'; toml='{ mode = "continuous", max_batch = 4 }' ;;
  none) batching='{"batching": {"mode": "none"}}'; toml='{ mode = "none" }' ;;
  dynamic) batching='{"batching": {"mode": "dynamic", "max_batch": 4, "wait_ms": 500}}'; toml='{ mode = "dynamic", max_batch = 4, wait_ms = 500 }' ;;
  *) echo "batching mode: continuous, none or dynamic" >&2; exit 2 ;;
esac
lengths=assets/datasets/smollm2_sharegpt_lengths.jsonl
sharegpt=../shared/data/conversations/sharegpt.jsonl
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(pwd)/experiments/out/fidelity_generation
mkdir -p "$tmp"
server=""
trap '[ -n "$server" ] && kill -TERM $server 2>/dev/null; wait 2>/dev/null' EXIT
if [ "${REPLAY:-0}" != 1 ]; then
"$bin" serve --task generate --port 0 --policy ssjf --predictor oracle --oracle-lengths "$lengths" \
  --sharegpt "$sharegpt" --policy-params "$batching" >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
[ -n "$url" ] || { cat "$tmp/serve.err"; exit 1; }
"$bin" bench --url "$url" --endpoint chat --lengths "$lengths" --sharegpt "$sharegpt" --rate "$rate" \
  --duration "$duration" --timeout 3600 --json --trace-out "$tmp/stream.jsonl" >"$tmp/live.json"
curl -s "$url/metrics" | grep -E '^morph_(time_to_first_token|time_per_output_token)_seconds_(sum|count)|^morph_generated_tokens_total|^morph_decode_iteration' >"$tmp/tokens.txt"
kill -TERM "$server"; wait "$server" || true; server=""
fi
cat >"$tmp/scenario.toml" <<EOF
name = "fidelity-generation"
duration_s = $duration
seeds = [1]
max_tokens = 256

[workload]
arrivals = { kind = "trace", path = "$tmp/stream.jsonl" }
lengths = { kind = "trace", path = "$tmp/stream.jsonl" }
outputs = { kind = "trace", path = "$tmp/stream.jsonl", input_column = "output_length" }

[cluster]
generation = $generation
runtimes = [{ runtime = "dynamic:2048x4", instances = 1 }]

[[policies]]
name = "ssjf"
predictor = "oracle"
batching = $toml
EOF
"$bin" simulate --scenario "$tmp/scenario.toml" --json >"$tmp/sim.json"
python3 - "$tmp" "$mode" <<'PY'
import json, sys
d, mode = sys.argv[1], sys.argv[2]
live = json.load(open(f"{d}/live.json"))[0]
sim = json.load(open(f"{d}/sim.json"))[0]
rows = [json.loads(l) for l in open(f"{d}/stream.jsonl")]
prompts = sorted(r["input_length"] for r in rows)
print(f"{mode} batching, {live['sent']} requests live (ok {live['ok']}, errors {live['errors']}), "
      f"{sim['requests']} simulated; prompt tokens median {prompts[len(prompts) // 2]}, max {prompts[-1]}; "
      f"mean output {sum(r['output_length'] for r in rows) / len(rows):.0f} tokens")
print(f"{'metric':<10} {'live s':>9} {'sim s':>9} {'sim/live':>9}")
for key, skey in [("mean_ms", "mean_latency_ms"), ("p50_ms", "p50_latency_ms"), ("p99_ms", "p99_latency_ms")]:
    l, s = live["latency"][key] / 1e3, sim[skey] / 1e3
    print(f"{key:<10} {l:>9.2f} {s:>9.2f} {s / l:>8.3f}x")
print(f"{'thr req/s':<10} {live['throughput_rps']:>9.3f} {sim['throughput_rps']:>9.3f}")
m = {k: float(v) for k, v in (l.split() for l in open(f"{d}/tokens.txt"))}
ttft = m["morph_time_to_first_token_seconds_sum"] / m["morph_time_to_first_token_seconds_count"]
tpot = m["morph_time_per_output_token_seconds_sum"] / m["morph_time_per_output_token_seconds_count"]
print(f"live server: time to first token {ttft:.2f} s, time per output token {1e3 * tpot:.1f} ms on average")
print("live decoder iterations (the serving path's K(b) and prefill steps):")
print(f"{'sequences':>10} {'prefill':>8} {'count':>7} {'mean ms':>9}")
for key, total in sorted(m.items()):
    if key.startswith("morph_decode_iteration_seconds_sum"):
        labels = key[key.index("{"):]
        count = m["morph_decode_iteration_seconds_count" + labels]
        seqs, prefill = (p.split("=")[1].strip('"') for p in labels.strip("{}").split(","))
        print(f"{seqs:>10} {prefill:>8} {count:>7.0f} {1e3 * total / count:>9.1f}")
PY
