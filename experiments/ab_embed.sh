#!/usr/bin/env bash
# The default embedding server of two builds side by side: another `morph` binary (e.g. built
# from an earlier commit: `git worktree add ../before REV && cargo build --release` there) and
# this checkout's, each `morph serve` with its defaults, given the same Poisson stream from this
# checkout's `morph bench`, in turns A B A B so that the host's drift falls on both.
#   experiments/ab_embed.sh OTHER_MORPH [RATE] [CORPUS] [SECONDS] [TURNS]
set -euo pipefail
cd "$(dirname "$0")/.."
other=$1
rate=${2:-200}
corpus=${3:-../shared/data/text/sst2/dev.tsv}
seconds=${4:-20}
turns=${5:-2}
. experiments/live_server.sh
this=$bin
for turn in $(seq "$turns"); do
  for side in other this; do
    bin=${!side}
    serve
    "$this" bench --url "$url" --corpus "$corpus" --rate 20 --duration 3 --json >/dev/null
    "$this" bench --url "$url" --corpus "$corpus" --rate "$rate" --duration "$seconds" --seed "$turn" --json \
      >"$tmp/$side.$turn.json"
    stop
  done
done
python3 - "$tmp" "$rate" "$corpus" "$other" "$turns" <<'PY'
import json, sys
d, rate, corpus, other, turns = sys.argv[1:]
turns = int(turns)
runs = {s: [json.load(open(f"{d}/{s}.{t}.json"))[0] for t in range(1, turns + 1)] for s in ("other", "this")}
print(f"default morph serve (embed), Poisson {rate} req/s, {corpus}; other = {other}")
print(f"{'build':<6} {'turn':>4} {'served rps':>11} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
for side, rs in runs.items():
    for t, r in enumerate(rs, 1):
        print(f"{side:<6} {t:>4} {r['throughput_rps']:>11.1f} {r['latency']['p50_ms']:>8.1f} "
              f"{r['latency']['p99_ms']:>8.1f} {r['errors']:>7}")
mean = lambda side, f: sum(f(r) for r in runs[side]) / turns
for name, f in (("served rps", lambda r: r["throughput_rps"]), ("p50 ms", lambda r: r["latency"]["p50_ms"]),
                ("p99 ms", lambda r: r["latency"]["p99_ms"])):
    print(f"this/other {name} (mean of the turns): {mean('this', f) / mean('other', f):.3f}x")
PY
