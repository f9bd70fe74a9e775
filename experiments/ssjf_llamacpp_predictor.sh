#!/usr/bin/env bash
# SSJF's predictor on the served decoder's own lengths: trains the head with each objective on
# the llama.cpp path's answers to the training split's rounds
# (assets/datasets/smollm2_llamacpp_train_lengths.jsonl, `morph train lengths --rounds train`), scores
# it on the held-out recording's test rounds (the ones `experiments/ssjf_live.sh` sends), writes
# their predictions, then simulates the JCT each objective's order gives in the live setting
# (assets/scenarios/ssjf_live_predictors_cpu.toml). Extra arguments go to `morph train predictor`, e.g.
# `--out assets/weights/predictor` to replace the built-in head with the first objective's.
#   experiments/ssjf_llamacpp_predictor.sh [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p morph-cli
target/release/morph train predictor --sharegpt ../shared/data/conversations/sharegpt.jsonl \
  --lengths assets/datasets/smollm2_llamacpp_train_lengths.jsonl \
  --test-lengths assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl \
  --predictions assets/datasets/ssjf_llamacpp_test_predictions.jsonl "$@"
target/release/morph simulate --scenario assets/scenarios/ssjf_live_predictors_cpu.toml
