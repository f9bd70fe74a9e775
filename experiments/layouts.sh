#!/usr/bin/env bash
# The layout a first start chooses on each core count of this host, and what every candidate serves.
#   1. For N in this host's cores, then 8, 4 and 2 below it: `morph serve` pinned to cores 0..N-1
#      (taskset) on the default model copied under a new folder name with one config field added
#      (a new content hash: no shipped or cached profile fits), from an empty MORPH_HOME/profiles,
#      stderr to a file: seconds to /ready 200 (polled every 0.25 s), the log's candidate layouts
#      with the sequences/s their fitted profiles give, and the one chosen.
#   2. On all cores, every candidate served (`--instances I --threads T`, planned from the
#      profile step 1 cached for it) on the same Poisson stream of AG News at RATE req/s (default
#      0.8 x the chosen candidate's sequences/s, past saturation) for SECONDS: served req/s, p99,
#      requests lost.
#   3. The full profile of the chosen layout in its dtype (`morph profile --dynamic`: 7 lengths x 5 batch sizes, 35
#      shapes as the shipped profiles have, its instances side by side), timed; then that layout
#      served as in 2 from its fitted profile and from the full one (`--profile`), one after the
#      other: the fitted profile's rate against the full one's.
#   experiments/layouts.sh [SECONDS per run] [RATE]
# CANDIDATES=0 leaves step 2 out (a short lease on a many-core host).
# MORPH_BIN: a prebuilt morph (a host without cargo); MODEL: the model folder to copy (default:
# the fetched default model); AGNEWS: the corpus; OUT_DIR: where the logs and layouts.txt go.
set -euo pipefail
cd "$(dirname "$0")/.."
. experiments/new_model.sh
seconds=${1:-10}
rate=${2:-}
agnews=${AGNEWS:-../shared/data/text/ag_news/train.csv}
out=${OUT_DIR:-experiments/out/layouts}
mkdir -p "$out"
. experiments/live_server.sh
say() { echo "$*" | tee -a "$out/layouts.txt"; }
: >"$out/layouts.txt"
pin() { launch=(taskset -c "0-$(($1 - 1))"); } # what `serve` starts next runs on cores 0..N-1

cores=$(nproc)
say "host: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(grep -c '^processor' /proc/cpuinfo) processors in /proc/cpuinfo," \
  "threads per core: $(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core: *//p')"

# A home with ONNX Runtime and the fetched models, and no profiles; the model under a new name.
real_home=${MORPH_HOME:-$HOME/.cache/morph}
model=${MODEL:-}
if [ -z "$model" ]; then
  "$bin" fetch >/dev/null
  model=$real_home/models/all-MiniLM-L6-v2
fi
copy=$tmp/my-encoder
new_model "$model" "$copy"
home() { # a fresh MORPH_HOME sharing the real one's ONNX Runtime and models
  export MORPH_HOME=$tmp/home-$1
  mkdir -p "$MORPH_HOME/profiles"
  for shared in models onnxruntime; do
    if [ -e "$real_home/$shared" ]; then ln -sfn "$real_home/$shared" "$MORPH_HOME/$shared"; fi
  done
}
ready() { # seconds since START until /ready answers 200 (polled every 0.25 s)
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready" || true)" = 200 ]; do
    kill -0 "$server" 2>/dev/null || { echo "morph serve exited:" >&2; tail -20 "$tmp/serve.err" >&2; exit 1; }
    sleep 0.25
  done
  python3 -c "print(round($(date +%s.%N) - $1, 1))"
}

# 1. First starts, all cores then fewer.
counts=$cores
for n in 8 4 2; do [ "$n" -lt "$cores" ] && counts="$counts $n"; done
for n in $counts; do
  home "$n"
  pin "$n"
  start=$(date +%s.%N)
  serve --model "$copy"
  after=$(ready "$start")
  stop
  cp "$tmp/serve.err" "$out/first_start_$n.log"
  candidates=$(sed -n 's/.*candidate layout, by its profile instances=\([0-9]*\) threads=\([0-9]*\) sequences_per_s="\([0-9.]*\)" engine="\([^"]*\)".*/\4 \1 x \2: \3/p' \
    "$out/first_start_$n.log" | paste -sd, | sed 's/,/, /g')
  chosen=$(sed -n 's/.*runtimes from the engine.s profile runtime=\([^ ]*\) instances=\([0-9]*\) threads=\([0-9]*\).*/\2 x \3 (\1)/p' \
    "$out/first_start_$n.log")
  say "$n cores: /ready 200 after $after s, $(wc -l <"$out/first_start_$n.log") log lines; candidates (sequences/s by the fitted profile): $candidates; chosen $chosen"
done
export MORPH_HOME=$tmp/home-$cores
read -r best_i best_t best_rate < <(sed -n 's/.*runtimes from the engine.s profile runtime=[^ ]* instances=\([0-9]*\) threads=\([0-9]*\) sequences_per_s="\([0-9.]*\)".*/\1 \2 \3/p' \
  "$out/first_start_$cores.log")
# The dtype it chose (both are measured on a CPU without int8 dot products): the full profile's.
best_dtype=$(grep -q 'runtimes from the engine.s profile .*engine="onnxruntime-int8"' "$out/first_start_$cores.log" &&
  echo int8 || echo fp32)
rate=${rate:-$(python3 -c "print(round(0.8 * $best_rate))")}

bench() { # bench LABEL: the AG News stream against $url; one line of layouts.txt
  "$bin" bench --url "$url" --corpus "$agnews" --rate "$rate" --duration "$seconds" --seed 1 --json >"$tmp/run.json"
  python3 - "$tmp/run.json" "$1" <<'PY' | tee -a "$out/layouts.txt"
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(f"  {sys.argv[2]}: offered {r['offered_rps']:.0f} req/s, served {r['throughput_rps']:.1f}, "
      f"p99 {r['latency']['p99_ms']:.0f} ms, lost {r['errors']}")
PY
}

served() { # served I T ARGS...: layout I x T on all cores, benched from its start
  local i=$1 t=$2 label=$3; shift 3
  pin "$cores"
  serve --model "$copy" --instances "$i" --threads "$t" "$@"
  ready "$(date +%s.%N)" >/dev/null
  bench "$i x $t ($label)"
  stop
}

# 2. Every candidate on all cores, from its fitted profile.
say "AG News, Poisson, $rate req/s offered, $seconds s runs, from each server's start, all $cores cores:"
if [ "${CANDIDATES:-1}" != 0 ]; then
  for i in $(seq "$cores"); do
    [ $((cores % i)) -eq 0 ] && served "$i" $((cores / i)) "fitted profile"
  done
fi

# 3. The chosen layout's full profile, and what it serves.
start=$(date +%s.%N)
pin "$cores"
"${launch[@]}" "$bin" profile --model "$copy" --threads "$best_t" --side-by-side "$best_i" --dtype "$best_dtype" \
  --dynamic --batches 1,2,4,8,16 --out "$out/full_profile.json" 2>"$tmp/profile.log"
say "full profile of $best_i x $best_t (35 shapes, 7 runs each): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
served "$best_i" "$best_t" "fitted profile"
served "$best_i" "$best_t" "full profile" --profile "$out/full_profile.json" --dtype "$best_dtype"
