#!/usr/bin/env bash
# SSJF's predictor ablation (Table 2) on the paper's dataset family, LMSYS prompts with their
# recorded output lengths: trains the head with each objective, prints accuracy, F1 and MAE on
# the test split, writes the test split's predictions, then simulates the JCT each predictor
# gives (assets/scenarios/ssjf_predictors_cpu.toml). Extra arguments go to `morph train predictor`,
# e.g. `--lengths assets/datasets/smollm2_sharegpt_lengths.jsonl --sharegpt FILE` to add SmolLM2's own.
#   experiments/ssjf_predictors.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
target/release/morph train predictor --data ../shared/data/traces/lmsys_llama_05.jsonl \
  --predictions assets/datasets/ssjf_test_predictions.jsonl "$@"
target/release/morph simulate --scenario assets/scenarios/ssjf_predictors_cpu.toml
