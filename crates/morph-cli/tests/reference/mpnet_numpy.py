"""An independent MPNet encoder in NumPy, the reference Morph's MPNet is checked against.

Written from Hugging Face's MPNetModel (modeling_mpnet.py): word plus position embeddings (the
positions counted from the padding id + 1), LayerNorm; per layer, attention whose scores get a
relative position bias (T5-style buckets of key - query, one table shared by the layers), then
residual + LayerNorm, the GELU (erf) feed-forward, residual + LayerNorm. Then the
sentence-transformers head of all-mpnet-base-v2: the mean over the tokens, L2-normalised.

Reads {"dir": MODEL_DIR, "ids": [[token ids], ...]} on stdin (one unpadded sequence per list)
and writes the vectors as a JSON list on stdout.
"""

import json
import math
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    return tensors


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def bucket(relative, num_buckets=32, max_distance=128):
    ret = 0
    n = -relative
    num_buckets //= 2
    if n < 0:
        ret += num_buckets
    n = abs(n)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)


ERF = np.vectorize(math.erf)


def encode(t, cfg, ids):
    n, heads = len(ids), cfg["num_attention_heads"]
    hidden = cfg["hidden_size"]
    d = hidden // heads
    eps = cfg["layer_norm_eps"]
    first = cfg["pad_token_id"] + 1
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][first:first + n]
    x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
    table = t["encoder.relative_attention_bias.weight"]
    buckets = np.array([[bucket(k - q, table.shape[0]) for k in range(n)] for q in range(n)])
    position_bias = table[buckets].transpose(2, 0, 1)  # [heads, n, n]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda v, name: v @ t[p + name + ".weight"].T + t[p + name + ".bias"]
        q, k, v = (lin(x, f"attention.attn.{part}").reshape(n, heads, d).transpose(1, 0, 2) for part in "qkv")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d) + position_bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, hidden)
        x = layer_norm(lin(context, "attention.attn.o") + x, t[p + "attention.LayerNorm.weight"], t[p + "attention.LayerNorm.bias"], eps)
        inner = lin(x, "intermediate.dense")
        inner = 0.5 * inner * (1.0 + ERF(inner / math.sqrt(2.0)))
        x = layer_norm(lin(inner, "output.dense") + x, t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"], eps)
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main():
    request = json.load(sys.stdin)
    with open(f"{request['dir']}/config.json") as f:
        cfg = json.load(f)
    tensors = load_safetensors(f"{request['dir']}/model.safetensors")
    json.dump([encode(tensors, cfg, ids).tolist() for ids in request["ids"]], sys.stdout)


main()
