"""The int8 model a TEI user would serve: an fp32 ONNX graph of the encoder quantised with
ONNX Runtime's own tool, `onnxruntime.quantization.quantize_dynamic` (int8 weights per output
channel, activations quantised to uint8 per tensor at run time), every MatMul with a constant
weight quantised and nothing kept in fp32.

    python experiments/tei_int8_model.py FP32.onnx INT8.onnx
"""
import sys

from onnxruntime.quantization import QuantType, quantize_dynamic

source, target = sys.argv[1], sys.argv[2]
quantize_dynamic(source, target, per_channel=True, weight_type=QuantType.QInt8)
print(f"{target}: quantised from {source}")
