#!/usr/bin/env python3
"""Writes a cross-encoder of cross-encoder/ms-marco-MiniLM-L6-v2's configuration with random
weights (BertForSequenceClassification: 6 layers, hidden 384, 12 heads, one relevance output) as
a model folder: config.json, model.safetensors and tokenizer.json (the default model's: the same
bert-base-uncased vocabulary). A reranker's speed does not depend on its weights, so this stands in for the
real checkpoint, which the hub holds and this host cannot reach.

usage: random_cross_encoder.py OUT_DIR [--tokenizer PATH]   (needs numpy and safetensors)
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

CONFIG = {
    "architectures": ["BertForSequenceClassification"],
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "pad_token_id": 0,
    "layer_norm_eps": 1e-12,
    "initializer_range": 0.02,
    "position_embedding_type": "absolute",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "id2label": {"0": "LABEL_0"},
    "label2id": {"LABEL_0": 0},
}

LAYER = {
    "attention.self.query": (384, 384),
    "attention.self.key": (384, 384),
    "attention.self.value": (384, 384),
    "attention.output.dense": (384, 384),
    "intermediate.dense": (1536, 384),
    "output.dense": (384, 1536),
}


def tensors(rng):
    std = CONFIG["initializer_range"]
    out = {}

    def dense(name, rows, cols):
        out[f"{name}.weight"] = rng.normal(0, std, (rows, cols)).astype(np.float32)
        out[f"{name}.bias"] = np.zeros(rows, np.float32)

    def norm(name, width=384):
        out[f"{name}.weight"] = np.ones(width, np.float32)
        out[f"{name}.bias"] = np.zeros(width, np.float32)

    out["bert.embeddings.word_embeddings.weight"] = rng.normal(0, std, (30522, 384)).astype(np.float32)
    out["bert.embeddings.position_embeddings.weight"] = rng.normal(0, std, (512, 384)).astype(np.float32)
    out["bert.embeddings.token_type_embeddings.weight"] = rng.normal(0, std, (2, 384)).astype(np.float32)
    norm("bert.embeddings.LayerNorm")
    for i in range(CONFIG["num_hidden_layers"]):
        prefix = f"bert.encoder.layer.{i}"
        for part, (rows, cols) in LAYER.items():
            dense(f"{prefix}.{part}", rows, cols)
        norm(f"{prefix}.attention.output.LayerNorm")
        norm(f"{prefix}.output.LayerNorm")
    dense("bert.pooler.dense", 384, 384)
    dense("classifier", 1, 384)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    default_tokenizer = os.path.expanduser(
        os.path.join(os.environ.get("MORPH_HOME", "~/.cache/morph"), "models/all-MiniLM-L6-v2/tokenizer.json")
    )
    parser.add_argument("--tokenizer", default=default_tokenizer, help="a bert-base-uncased tokenizer.json")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    save_file(tensors(np.random.default_rng(args.seed)), os.path.join(args.out, "model.safetensors"))
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    print(args.out)


if __name__ == "__main__":
    main()
