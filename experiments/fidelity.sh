#!/usr/bin/env bash
# Simulator fidelity: the same request stream (a scenario's workload and seed) served live by
# `morph serve` and simulated by `morph simulate`, side by side.
#   experiments/fidelity.sh [SCENARIO] [--real]
# With --real the live server computes with the candle engine instead of emulating the profile.
# The server is configured from the scenario: its profile, first runtime group and first policy.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-assets/scenarios/fidelity_cpu.toml}
read -r profile runtime instances tokens queue < <(python3 - "$scenario" <<'PY'
import os, sys, tomllib
s = tomllib.load(open(sys.argv[1], "rb"))
c, p = s["cluster"], s["policies"][0]
assert p["name"] == "dynamic-batching", "the live server runs the dynamic-batching policy"
g = c["runtimes"][0]
profile = os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), c["profile"]))
print(profile, g["runtime"], g["instances"], p.get("max_batch_tokens", 16384), p.get("max_queue", 1024))
PY
)
engine=(--engine emulated --profile "$profile")
[ "${2:-}" = "--real" ] && engine=(--engine candle)
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(mktemp -d)
"$bin" serve --port 0 "${engine[@]}" --runtime "$runtime" --instances "$instances" \
  --max-batch-tokens "$tokens" --max-queue "$queue" >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
"$bin" bench --url "$url" --scenario "$scenario" --json >"$tmp/live.json"
"$bin" simulate --scenario "$scenario" --json >"$tmp/sim.json"
curl -s "$url/metrics" | grep -E '^morph_(request_input_length|inference_seconds|batch_size|queue_seconds|tokenization_seconds)_(sum|count)' >"$tmp/lengths.txt"
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
live = json.load(open(f"{d}/live.json"))[0]
sim = json.load(open(f"{d}/sim.json"))[0]
served = dict(l.split() for l in open(f"{d}/lengths.txt"))
print(f"requests: live sent {live['sent']} (ok {live['ok']}, errors {live['errors']}), simulated {sim['requests']}")
m = {k: float(v) for k, v in served.items()}
print(f"tokens the live server saw: {m['morph_request_input_tokens_sum']:.0f} over {m['morph_request_input_tokens_count']:.0f} inputs")
print(f"live server: {m['morph_batch_sequences_count']:.0f} batches of {m['morph_batch_sequences_sum'] / m['morph_batch_sequences_count']:.2f} on average, "
      f"engine {1e3 * m['morph_inference_seconds_sum'] / m['morph_inference_seconds_count']:.2f} ms per batch, "
      f"queue {1e3 * m['morph_queue_seconds_sum'] / m['morph_queue_seconds_count']:.2f} ms and tokenizing "
      f"{1e3 * m['morph_tokenization_seconds_sum'] / m['morph_tokenization_seconds_count']:.2f} ms per call; "
      f"simulated utilisation {sim['mean_utilisation']:.3f} over {sim['duration_s']:.1f} s")
print(f"{'metric':<10} {'live ms':>10} {'sim ms':>10} {'sim/live':>9}")
for key, skey in [("mean_ms", "mean_latency_ms"), ("p50_ms", "p50_latency_ms"), ("p98_ms", "p98_latency_ms"), ("p99_ms", "p99_latency_ms")]:
    l, s = live["latency"][key], sim[skey]
    print(f"{key:<10} {l:>10.2f} {s:>10.2f} {s / l:>8.3f}x")
PY
