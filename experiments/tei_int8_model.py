"""The int8 model a TEI user would serve: an fp32 ONNX graph of the encoder quantised with
ONNX Runtime's own tool, `onnxruntime.quantization.quantize_dynamic` (int8 weights per output
channel, activations quantised to uint8 per tensor at run time), every MatMul with a constant
weight quantised and nothing kept in fp32.

The graph is Morph's fp32 graph with the padding kept. Its padded keys' attention bias is set
to what a standard export of the model writes (transformers' extended attention mask: the
float32 minimum), unless `--morph-bias` keeps Morph's own (-30, which keeps `exp` out of
underflow and Softmax fast on Intel cores).

    python experiments/tei_int8_model.py FP32.onnx INT8.onnx [--morph-bias]
"""
import argparse
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

# The stem of the initialiser Morph's graph multiplies (mask - 1) by (`PADDED_KEY_BIAS_STEM`).
BIAS_STEM = "padded_key_bias"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("source")
parser.add_argument("target")
parser.add_argument("--morph-bias", action="store_true", help="keep Morph's padded-key bias")
args = parser.parse_args()

model = onnx.load(args.source)
if not args.morph_bias:
    biases = [t for t in model.graph.initializer if t.name.startswith(BIAS_STEM)]
    if not biases:
        raise SystemExit(f"{args.source}: no initialiser named {BIAS_STEM}*")
    for t in biases:
        t.CopyFrom(numpy_helper.from_array(np.array(np.finfo(np.float32).max, dtype=np.float32), t.name))
with tempfile.NamedTemporaryFile(suffix=".onnx") as rewritten:
    onnx.save(model, rewritten.name)
    quantize_dynamic(rewritten.name, args.target, per_channel=True, weight_type=QuantType.QInt8)
bias = "Morph's" if args.morph_bias else "a standard export's"
print(f"{args.target}: quantised from {args.source}, {bias} padded-key bias")
