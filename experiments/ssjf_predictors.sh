#!/usr/bin/env bash
# SSJF's predictor ablation (Table 2): trains the head with each objective on the predictor's
# data (SmolLM2's own recorded lengths for ShareGPT rounds, and LMSYS), prints accuracy, F1 and
# MAE on the test split (with the default objective's scores by source and by round), writes
# the test split's predictions, then simulates the JCT each predictor gives.
#   experiments/ssjf_predictors.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
target/release/morph train predictor --data ../shared/data/traces/lmsys_llama_05.jsonl \
  --lengths datasets/smollm2_sharegpt_lengths.jsonl --sharegpt ../shared/data/conversations/sharegpt.jsonl \
  --predictions datasets/ssjf_test_predictions.jsonl "$@"
target/release/morph simulate --scenario scenarios/ssjf_predictors_cpu.toml
