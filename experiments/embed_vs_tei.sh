#!/usr/bin/env bash
# Embedding serving: `morph serve` with no flags (runtimes, layout and length buckets from the
# engine's profile; int8 graphs where int8 pays) against the real TEI, int8 and fp32, on the same Poisson
# streams, one server after the other, the load generator on this machine.
# Per corpus (SST-2 sentences, AG News title + description, and the 50/50 mix) and server:
#   - a sweep of 15 s runs at rates rising by 15% from 40 req/s until two runs in a row have
#     errors or p99 over 500 ms (one such run can be a pause of this shared host): the
#     saturation throughput is the highest rate that had neither; then two runs halve (in ratio)
#     the step between it and the rate that missed above it, so saturation is known to within
#     1.15^(1/4), about 3.6%, rather than a whole 15% step (a run that misses there is not
#     retried: a pause of the host can only put saturation lower);
#   - a run at 80% of it: p50 / p99;
#   - runs at 1.25x and 1.5x it: the rate served past saturation (it must not fall);
#   - with PAST_ROUNDS=N, N more rounds of a run at saturation and one at 1.5x it, back to back
#     (the first of the two turned each round), and the medians over the rounds of served at
#     1.5x / served at saturation in the same round, and / the saturation rate (one pair reads
#     either only to about +-0.1 on a shared host);
#   - with P80_ROUNDS=N, N more runs at 80% of saturation, and the median and range of p99 over
#     them and the first (one run's p99 moves by tens of percent on a shared host);
#   - the server's CPU (cores busy, from /proc) and the load generator's, at saturation.
# Every run starts once the server is idle (the backlog of the run before, if any, done).
# Servers:
#   tei       the real TEI (text-embeddings-router, ONNX Runtime backend, as its users run it:
#             default flags) serving the int8 model a TEI user makes: a standard ONNX export of
#             the same checkpoint quantised by onnxruntime's quantize_dynamic, per channel;
#   tei-fp32  the real TEI on that export in fp32 (TEI's default precision);
#   morph (the defaults: int8 graphs where the CPU has int8 dot products, VNNI or AMX, else
#             the dtype whose profile serves more), morph-fp32 and morph-int8 (the defaults
#             with --dtype fp32 or int8);
#   morph-like-tei  Morph configured like TEI (one FIFO, batches of at most 8 padded to their
#             longest, fp32 graphs: --runtime dynamic:512x8 --dtype fp32): Morph, not TEI;
#   morph-before (the defaults of another morph binary, $MORPH_BEFORE: an earlier commit);
#   morph-IxT (the defaults in the layout of I instances of T threads each: `--instances I
#             --threads T`, its buckets from that layout's own profile).
# The peers come from $MORPH_PEERS (experiments/peers.md): the TEI binary, and the model
# directories experiments/tei_model.py makes there once.
# The sweep starts at $START req/s (default 40).
#   experiments/embed_vs_tei.sh [CORPORA: sst2,agnews,mix] [SECONDS] [SERVERS: tei,tei-fp32,morph]
set -euo pipefail
cd "$(dirname "$0")/.."
corpora=${1:-sst2,agnews,mix}
seconds=${2:-15}
servers=${3:-tei,tei-fp32,morph}
sst2=../shared/data/text/sst2/dev.tsv
agnews=../shared/data/text/ag_news/train.csv
. experiments/live_server.sh
out=experiments/out/embed_vs_tei
mkdir -p "$out"
tick=$(getconf CLK_TCK)
start_rate=${START:-40}
past_rounds=${PAST_ROUNDS:-0}
p80_rounds=${P80_ROUNDS:-0}
own_bin=$bin

. experiments/peers.sh

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

# Each run starts on an idle server: a server that keeps computing the calls a finished run's
# client gave up on (TEI does) would otherwise carry that backlog into the next run. Waits
# until the server used under 10% of a core over a second (at most a minute).
settle() {
  local before after
  for _ in $(seq 60); do
    before=$(cpu_ticks); sleep 1; after=$(cpu_ticks)
    [ $(((after - before) * 10)) -lt "$tick" ] && return
  done
  echo "  the server stayed busy for a minute after the run before" >&2
}

# run RATE FILE: one bench run at RATE, its JSON report with the server's CPU (cores) added.
run() {
  local before after
  settle
  before=$(cpu_ticks)
  "$bin" bench --url "$url" "${corpus_args[@]}" --rate "$1" --duration "$seconds" --json >"$tmp/run.json"
  after=$(cpu_ticks)
  python3 - "$tmp/run.json" "$before" "$after" "$tick" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
r["server_cpu_cores"] = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]) / r["wall_s"]
with open(sys.argv[5], "a") as f:
    f.write(json.dumps(r) + "\n")
print(f'  {r["offered_rps"]:7.1f} req/s: served {r["throughput_rps"]:7.1f}, p99 {r["latency"]["p99_ms"]:8.1f} ms, errors {r["errors"]}, server CPU {100 * r["server_cpu_cores"]:.0f}%, client CPU {100 * r["client_cpu_cores"]:.0f}%')
PY
}

kept_up() { python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; sys.exit(0 if r["errors"] == 0 and r["latency"]["p99_ms"] < 500 else 1)' "$1"; }

for corpus in ${corpora//,/ }; do
  case $corpus in
    sst2) corpus_args=(--corpus "$sst2") ;;
    agnews) corpus_args=(--corpus "$agnews") ;;
    mix) corpus_args=(--corpus "$sst2" --corpus "$agnews") ;;
    *) echo "unknown corpus $corpus (sst2, agnews, mix)" >&2; exit 2 ;;
  esac
  for config in ${servers//,/ }; do
    bin=$own_bin
    case $config in
      tei) serve_tei int8 ;;
      tei-fp32) serve_tei fp32 ;;
      morph-like-tei) serve --runtime dynamic:512x8 --dtype fp32 ;;
      morph) serve ;;
      morph-fp32) serve --dtype fp32 ;;
      morph-int8) serve --dtype int8 ;;
      morph-before) bin=${MORPH_BEFORE:?set MORPH_BEFORE to another morph binary}; serve ;;
      morph-[0-9]*x[0-9]*) layout=${config#morph-}; serve --instances "${layout%x*}" --threads "${layout#*x}" ;;
      *) echo "unknown server $config (tei, tei-fp32, morph, morph-fp32, morph-int8, morph-like-tei, morph-before, morph-IxT)" >&2; exit 2 ;;
    esac
    echo "$corpus / $config:"
    sweep=$out/$corpus.$config.sweep.jsonl
    rm -f "$sweep" "$out/$corpus.$config.points.jsonl"
    rate=$start_rate
    sat=0
    misses=0
    while [ "$misses" -lt 2 ]; do
      run "$rate" "$sweep"
      if kept_up "$sweep"; then sat=$rate; misses=0; else misses=$((misses + 1)); fi
      rate=$(python3 -c "print(round($rate * 1.15, 1))")
    done
    [ "$sat" != 0 ] || { echo "  $config did not keep up at $start_rate req/s" >&2; stop; continue; }
    missed=$(python3 -c "print(round($sat * 1.15, 1))")
    for _ in 1 2; do
      rate=$(python3 -c "print(round(($sat * $missed) ** 0.5, 1))")
      run "$rate" "$sweep"
      if kept_up "$sweep"; then sat=$rate; else missed=$rate; fi
    done
    for f in 0.8 1.25 1.5; do
      run "$(python3 -c "print(round($sat * $f, 1))")" "$out/$corpus.$config.points.jsonl"
    done
    p80=$out/$corpus.$config.p80.jsonl
    head -1 "$out/$corpus.$config.points.jsonl" >"$p80"
    for _ in $(seq "$p80_rounds"); do run "$(python3 -c "print(round($sat * 0.8, 1))")" "$p80"; done
    [ "$p80_rounds" = 0 ] || python3 - "$p80" <<'PY'
import json, statistics, sys
p99 = sorted(json.loads(l)["latency"]["p99_ms"] for l in open(sys.argv[1]))
print(f"  p99 at 80%, {len(p99)} runs: median {statistics.median(p99):.1f} ms ({p99[0]:.1f}-{p99[-1]:.1f})")
PY
    past=$out/$corpus.$config.past.jsonl
    rm -f "$past"
    for round in $(seq "$past_rounds"); do
      # Saturation and 1.5x it back to back, the first of the two turned each round.
      factors="1 1.5"; [ $((round % 2)) = 0 ] && factors="1.5 1"
      for f in $factors; do run "$(python3 -c "print(round($sat * $f, 1))")" "$past"; done
    done
    [ "$past_rounds" = 0 ] || python3 - "$past" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
pairs = [sorted(runs[i:i + 2], key=lambda r: r["offered_rps"]) for i in range(0, len(runs), 2)]
def summary(ratios):
    ratios = sorted(ratios)
    return f"median {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"
print(f"  served at 1.5x, {len(pairs)} rounds: / served at saturation in its round "
      f"{summary(high['throughput_rps'] / at['throughput_rps'] for at, high in pairs)}; "
      f"/ the saturation rate {summary(high['throughput_rps'] / at['offered_rps'] for at, high in pairs)}")
PY
    stop
  done
done

python3 experiments/embed_vs_tei_table.py "$out" "$corpora" "$servers" "$seconds" "$(peer_versions)"
