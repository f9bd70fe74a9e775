#!/usr/bin/env bash
# A first start on a model Morph has no profile for, and what its profile serves.
#   1. The default model copied under a new folder name with one field added to its config (so
#      its content hash is new: no shipped or cached profile fits), an empty MORPH_HOME/profiles,
#      `morph serve --model COPY` with stderr to a file: seconds until /ready answers 200
#      (polled once a second; what it answered meanwhile is kept), and the log lines it wrote.
#   2. What that start's fitted profile serves against the full profile Morph ships for the
#      same network (35 shapes measured, 7 runs each): the default model and the copy served
#      one after the other, in turns, on the same Poisson streams, at 0.8, 1, 1.2 and 1.5 times a
#      nominal saturation of the default on this 2-core host (SST-2 450, AG News 160, the 50/50
#      mix 260 req/s): the rate served and p99 at each, from each server's first second (no
#      warm-up run), on Poisson arrivals or, with CV, Gamma arrivals of that coefficient of
#      variation (bursts).
#   experiments/first_start.sh [SECONDS per run] [TURNS] [CV]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
turns=${2:-2}
cv=${3:-}
arrivals=()
[ -z "$cv" ] || arrivals=(--cv "$cv")
sst2=../shared/data/text/sst2/dev.tsv
agnews=../shared/data/text/ag_news/train.csv
. experiments/live_server.sh
. experiments/new_model.sh
out=experiments/out/first_start
mkdir -p "$out"

# A home with the fetched models and ONNX Runtime, and no profiles.
real_home=${MORPH_HOME:-$HOME/.cache/morph}
"$bin" fetch >/dev/null
export MORPH_HOME=$tmp/home
mkdir -p "$MORPH_HOME/profiles"
for shared in models onnxruntime; do ln -s "$real_home/$shared" "$MORPH_HOME/$shared"; done
copy=$tmp/my-encoder
new_model "$real_home/models/all-MiniLM-L6-v2" "$copy"

echo "first start of $copy (no profile for it), stderr to $out/first_start.log:"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
"$bin" serve --model "$copy" --port "$port" >"$tmp/first.out" 2>"$out/first_start.log" &
server=$!
: >"$out/ready_polls.txt"
while :; do
  code=$(curl -s -o "$tmp/ready.json" -w '%{http_code}' "http://127.0.0.1:$port/ready" || true)
  now=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  [ "$code" = 000 ] || echo "$now s: $code $(cat "$tmp/ready.json")" >>"$out/ready_polls.txt"
  [ "$code" = 200 ] && break
  kill -0 "$server" 2>/dev/null || { echo "morph serve exited:" >&2; cat "$out/first_start.log" >&2; exit 1; }
  sleep 1
done
echo "  /ready 200 after $now s"
stop
echo "  what /ready answered meanwhile:"
sed 's/^/    /' "$out/ready_polls.txt"
echo "  the log:"
sed 's/^/    /' "$out/first_start.log"

rm -f "$out"/rates.jsonl
for corpus in sst2 agnews mix; do
  case $corpus in
    sst2) corpus_args=(--corpus "$sst2"); sat=450 ;;
    agnews) corpus_args=(--corpus "$agnews"); sat=160 ;;
    mix) corpus_args=(--corpus "$sst2" --corpus "$agnews"); sat=260 ;;
  esac
  for turn in $(seq "$turns"); do
    for side in full fitted; do
      case $side in
        full) serve ;;
        fitted) serve --model "$copy" ;;
      esac
      for f in 0.8 1.0 1.2 1.5; do
        rate=$(python3 -c "print(round($sat * $f, 1))")
        "$bin" bench --url "$url" "${corpus_args[@]}" --rate "$rate" --duration "$seconds" --seed "$turn" "${arrivals[@]}" --json \
          >"$tmp/run.json"
        python3 - "$tmp/run.json" "$corpus" "$side" "$turn" "$f" <<'PY' | tee -a "$out/rates.jsonl"
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(json.dumps({"corpus": sys.argv[2], "side": sys.argv[3], "turn": int(sys.argv[4]), "factor": float(sys.argv[5]),
                  "offered": r["offered_rps"], "served": r["throughput_rps"], "p99_ms": r["latency"]["p99_ms"],
                  "errors": r["errors"]}))
PY
      done
      grep -o 'runtimes from.*' "$tmp/serve.err" | cut -c1-140 | sed "s/^/  $side: /"
      echo "  $side: bucket refits $(curl -s "$url/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["policy"]["bucket_refits"])')"
      stop
    done
  done
done

python3 - "$out/rates.jsonl" "$seconds" "$turns" "$cv" <<'PY'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = defaultdict(list)
for r in rows:
    runs[(r["corpus"], r["factor"], r["side"])].append(r)
mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)
arrivals = f"Gamma arrivals, CV {sys.argv[4]}" if sys.argv[4] else "Poisson arrivals"
print(f"\nfitted profile (8 shapes) against the full one (35 shapes), {arrivals}, {sys.argv[2]} s runs from each server's start, mean of {sys.argv[3]} turns")
print(f"{'corpus':<7} {'offered':>8} {'full served':>11} {'p99 ms':>8} {'lost':>6} {'fitted served':>13} {'p99 ms':>8} {'lost':>6} {'fitted/full':>11}")
for (corpus, factor, side), rs in sorted(runs.items()):
    if side != "full":
        continue
    fitted = runs[(corpus, factor, "fitted")]
    ratio = mean(fitted, "served") / mean(rs, "served")
    print(f"{corpus:<7} {mean(rs, 'offered'):>8.0f} {mean(rs, 'served'):>11.1f} {mean(rs, 'p99_ms'):>8.0f} "
          f"{mean(rs, 'errors'):>6.0f} {mean(fitted, 'served'):>13.1f} {mean(fitted, 'p99_ms'):>8.0f} "
          f"{mean(fitted, 'errors'):>6.0f} {ratio:>10.2f}x")
PY
