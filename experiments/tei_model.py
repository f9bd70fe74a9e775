"""The model directories a TEI user serves with TEI's ONNX Runtime backend: the checkpoint's
config, tokenizer and pooling beside `onnx/model.onnx`, a standard export of the same weights
(transformers' BertModel through `torch.onnx.export`, inputs `input_ids`, `attention_mask`,
`token_type_ids`, output `last_hidden_state`, or `logits` for a classifier or reranker
(`BertForSequenceClassification`), batch and sequence dynamic, as the hub's `onnx/model.onnx`
files are), in fp32 and quantised with ONNX Runtime's own
`quantize_dynamic` (int8 weights per output channel, activations uint8 per tensor at run time).

    python experiments/tei_model.py CHECKPOINT_DIR OUT_DIR   # writes OUT_DIR/fp32 and OUT_DIR/int8

Needs torch, transformers, onnx and onnxruntime (a venv of its own; experiments/peers.md).
"""
import argparse
import pathlib
import shutil

import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

# What the checkpoint directory must hold beside the weights for TEI to serve it.
SERVED_FILES = ["config.json", "tokenizer.json"]
OPSET = 17

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("checkpoint", type=pathlib.Path)
parser.add_argument("out", type=pathlib.Path)
args = parser.parse_args()


def model_dir(name: str) -> pathlib.Path:
    target = args.out / name
    (target / "onnx").mkdir(parents=True, exist_ok=True)
    for file in SERVED_FILES:
        shutil.copy(args.checkpoint / file, target / file)
    pooling = args.checkpoint / "1_Pooling"
    if pooling.is_dir():
        shutil.copytree(pooling, target / "1_Pooling", dirs_exist_ok=True)
    return target


class Exported(torch.nn.Module):
    """The model called by keyword, one output out (what the hub's exports hold)."""

    def __init__(self, model, output):
        super().__init__()
        self.model, self.output = model, output

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return getattr(out, self.output)


architectures = AutoConfig.from_pretrained(args.checkpoint).architectures or []
if any(a.endswith("ForSequenceClassification") for a in architectures):
    output = "logits"
    model = Exported(AutoModelForSequenceClassification.from_pretrained(args.checkpoint), output).eval()
else:
    output = "last_hidden_state"
    model = Exported(AutoModel.from_pretrained(args.checkpoint), output).eval()
fp32 = model_dir("fp32") / "onnx" / "model.onnx"
example = torch.ones((2, 16), dtype=torch.long)
dynamic = {0: "batch", 1: "sequence"}
outputs = {output: dynamic if output == "last_hidden_state" else {0: "batch"}}
with torch.no_grad():
    torch.onnx.export(
        model,
        (example, example, torch.zeros_like(example)),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=[output],
        dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "token_type_ids": dynamic, **outputs},
        opset_version=OPSET,
        dynamo=False,
    )
int8 = model_dir("int8") / "onnx" / "model.onnx"
quantize_dynamic(str(fp32), str(int8), per_channel=True, weight_type=QuantType.QInt8)
print(f"{fp32}\n{int8}")
