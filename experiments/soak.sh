#!/usr/bin/env bash
# Soak: `morph serve` with its defaults under a steady open-loop load for a long run, its
# resident memory (VmRSS) and open file descriptors sampled every 10 s. The rate is 80% of the
# saturation a short sweep finds first (the highest rate served with no errors and p99 under
# 500 ms), unless given. Prints the samples as a table and a text plot, the load's outcome, and
# whether RSS stayed within ±5% of its median after the first minute.
#   experiments/soak.sh [MINUTES] [CORPUS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
corpus=${2:-../shared/data/text/sst2/dev.tsv}
rate=${3:-}
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(mktemp -d)
server=
sampler=
stop() {
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
  sampler=
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  server=
}
trap 'stop; rm -rf "$tmp"' EXIT

"$bin" serve --port 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
[ -n "$url" ] || { echo "morph serve did not start:" >&2; cat "$tmp/serve.err" >&2; exit 1; }

if [ -z "$rate" ]; then
  "$bin" bench --url "$url" --corpus "$corpus" --rate 10,20,30,40,50,60,70,80,90,100 --duration 8 --json \
    >"$tmp/sweep.json"
  rate=$(python3 - "$tmp/sweep.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
kept_up = [r for r in runs if r["errors"] == 0 and r["latency"]["p99_ms"] < 500]
print(round(0.8 * max((r["offered_rps"] for r in kept_up), default=runs[0]["offered_rps"]), 1))
PY
)
fi
echo "soak: $minutes min at $rate req/s on $url (corpus $corpus), sampling every 10 s" >&2

# Samples: seconds since the start, RSS in MiB, open file descriptors.
start=$(date +%s)
(
  while kill -0 "$server" 2>/dev/null; do
    rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
    fds=$(ls "/proc/$server/fd" | wc -l)
    echo "$(( $(date +%s) - start )) $(( rss_kb / 1024 )) $fds"
    sleep 10
  done
) >"$tmp/samples.txt" &
sampler=$!
"$bin" bench --url "$url" --corpus "$corpus" --rate "$rate" --duration $(( minutes * 60 )) --json >"$tmp/load.json"
sleep 10
stop

python3 - "$tmp/samples.txt" "$tmp/load.json" <<'PY'
import json, statistics, sys
samples = [tuple(map(int, line.split())) for line in open(sys.argv[1]) if line.strip()]
load = json.load(open(sys.argv[2]))[0]
print(f"{'t s':>6} {'RSS MiB':>8} {'fds':>5}")
peak = max(r for _, r, _ in samples)
for t, rss, fds in samples:
    print(f"{t:>6} {rss:>8} {fds:>5}  " + "#" * max(1, round(50 * rss / peak)))
lat = load["latency"]
print(f"load: {load['sent']} sent at {load['offered_rps']} req/s, {load['ok']} ok, {load['errors']} errors "
      f"{load['error_kinds']}, p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms")
steady = [r for t, r, _ in samples if t >= 60] or [r for _, r, _ in samples]
median = statistics.median(steady)
low, high = min(steady) / median - 1, max(steady) / median - 1
verdict = "flat" if max(-low, high) <= 0.05 else "NOT flat"
print(f"RSS after the first minute: median {median} MiB, {low:+.1%} .. {high:+.1%} ({verdict} within ±5%); "
      f"open files {min(f for *_, f in samples)}..{max(f for *_, f in samples)}")
PY
