#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ (cargo-fuzz, nightly toolchain) for SECONDS each, one
# after another, seeded from fuzz/corpus/TARGET (kept in the repo) and, for the scenario and
# profile targets, the repo's own assets/scenarios/ and assets/profiles/; inputs the fuzzer finds go to
# fuzz/work/, crashes to fuzz/artifacts/, both ignored by git. Prints one line per target:
# runs, coverage, corpus size and whether it crashed.
#   cargo install cargo-fuzz   # once
#   experiments/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request_body scenario trace_csv trace_jsonl profile gguf_tokenizer)
mkdir -p work logs
for t in "${targets[@]}"; do
  mkdir -p "work/$t"
  seeds=("corpus/$t")
  case $t in
    scenario) seeds+=(../assets/scenarios) ;;
    profile) seeds+=(../assets/profiles) ;;
  esac
  cargo +nightly fuzz run -O "$t" "work/$t" "${seeds[@]}" -- -max_total_time="$secs" -rss_limit_mb=4096 \
    >"logs/$t.log" 2>&1
  rc=$?
  stats=$(grep -E '^#[0-9]+' "logs/$t.log" | tail -1 | sed 's/^\(#[0-9]*\)\s*\(\w*\)/\1 \2/')
  verdict=$([ $rc -eq 0 ] && echo "no crash" || echo "CRASH (rc $rc, see fuzz/logs/$t.log and fuzz/artifacts/$t/)")
  echo "$t: ${secs}s, $verdict; last status: $stats"
done
