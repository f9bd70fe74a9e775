#!/usr/bin/env python3
"""How a GGUF's quantization format moves a CPU decoder's prefill and decode speed: the default
model (SmolLM2-135M-Instruct, shipped as Q4_1) against the same weights requantized to Q8_0 and
to Q4_0 (read back from Q4_1 and quantized again by the `gguf` package, `pip install gguf`),
each served by `morph serve --task generate --model FILE --prefill-weights file` (the file's
weights throughout), one at a time, and the shipped file as Morph serves it by default (prompts
prefilled on its Q8_0 copy, answers decoded on its own weights). llama.cpp's x86 kernels prefill
Q4_0 and Q8_0 as matrix products (its GEMM kernels), but Q4_1 a dot product at a time; decoding,
one token a step, is dot products for every format. Perplexity is scored with `echo`, which runs
on the file's own weights whatever --prefill-weights says.

Prints, per format: prefill ms per prompt token (prompts of about 512 and 1,024 tokens, each its
own, `max_tokens` 1), decode ms per output token (greedy, 128 tokens from short prompts), the
ratios to Q4_1, and the perplexity of held-out text: ShareGPT assistant answers (the repo holds
none), each scored whole through completions' `echo` with `logprobs` (`max_tokens` 0).

usage: experiments/gguf_formats.py [--morph target/release/morph] [--rounds 3]
           [--texts ../shared/data/conversations/sharegpt.jsonl] [--answers 20]
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile

import gguf
from gguf import GGMLQuantizationType as Quant

sys.path.insert(0, os.path.dirname(__file__))
from servers import cpu_name, default_decoder, timed_completion, unique_prompt  # noqa: E402

PREFILL_WORDS = (512, 1024)  # about as many tokens
STORIES = ("Once upon a time", "The old lighthouse keeper", "In the year 2200, the city", "Dear diary, today")
DECODE_TOKENS = 128


def requantize(source, target, quant):
    """Writes `source` with each of its Q4_1 tensors quantized again to `quant`."""
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind = field.types[0]
        sub = {"sub_type": field.types[-1]} if kind == gguf.GGUFValueType.ARRAY else {}
        writer.add_key_value(name, field.contents(), kind, **sub)
    for tensor in reader.tensors:
        data, kind = tensor.data, tensor.tensor_type
        if kind == Quant.Q4_1:
            data, kind = gguf.quants.quantize(gguf.quants.dequantize(data, kind), quant), quant
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def answers(path, count):
    """The first `count` assistant answers of 100 to 300 words in a ShareGPT file."""
    found = []
    with open(path) as f:
        for line in f:
            for turn in json.loads(line)["turns"]:
                if turn["role"] == "assistant" and 100 <= len(turn["content"].split()) <= 300:
                    found.append(turn["content"])
                    if len(found) == count:
                        return found
    return found


def perplexity(port, texts):
    """exp of the mean negative log-probability of the texts' tokens (each text's first unscored)."""
    logprobs = []
    for text in texts:
        _, answer = timed_completion(port, {"prompt": text, "max_tokens": 0, "echo": True, "logprobs": 0})
        logprobs += [lp for lp in answer["choices"][0]["logprobs"]["token_logprobs"] if lp is not None]
    return math.exp(-statistics.mean(logprobs))


def measure(binary, gguf_path, prefill_weights, rounds, texts, log_path):
    """Prefill ms per token by prompt length, decode ms per token, and the texts' perplexity, with
    prompts prefilled on `prefill_weights`."""
    extra = ["--prefill-weights", prefill_weights]
    server = default_decoder(binary, log_path, model=gguf_path, extra=extra)
    port = server.port
    try:
        prefill = {}
        for words in PREFILL_WORDS:
            per_token = []
            for seed in range(rounds):
                seconds, answer = timed_completion(port, {"prompt": unique_prompt(words, words + seed), "max_tokens": 1})
                per_token.append(seconds / answer["usage"]["prompt_tokens"] * 1e3)
            prefill[words] = statistics.mean(per_token)
        decode = []
        for story in STORIES:
            # One token first, so the timed call's prefill is the prompt cache's (a few tokens).
            timed_completion(port, {"prompt": story, "max_tokens": 1, "temperature": 0})
            seconds, answer = timed_completion(port, {"prompt": story, "max_tokens": DECODE_TOKENS, "temperature": 0})
            decode.append(seconds / answer["usage"]["completion_tokens"] * 1e3)
        return prefill, statistics.mean(decode), perplexity(port, texts)
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--morph", default="target/release/morph")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", default=os.path.join(os.path.dirname(__file__), "../../shared/data/conversations/sharegpt.jsonl"))
    parser.add_argument("--answers", type=int, default=20)
    args = parser.parse_args()
    if not os.path.exists(args.texts):
        sys.exit(f"{args.texts} is missing: give --texts a ShareGPT JSONL file (turns of role and content)")
    texts = answers(args.texts, args.answers)
    home = os.environ.get("MORPH_HOME", os.path.expanduser("~/.cache/morph"))
    shipped = os.path.join(home, "models", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(shipped):
        sys.exit(f"{shipped} is missing: run `morph serve --task generate` once to fetch it")
    with tempfile.TemporaryDirectory() as scratch:
        # Each file served as itself (`--prefill-weights file`), and the shipped one as Morph
        # serves it by default: prompts prefilled on its Q8_0 copy, decoded on its own weights.
        files = {"Q4_1 (shipped)": (shipped, "file"), "Q4_1, prefilled on its Q8_0 copy": (shipped, "q8_0")}
        for quant in (Quant.Q8_0, Quant.Q4_0):
            path = os.path.join(scratch, f"smollm2-{quant.name}.gguf")
            files[f"{quant.name} (from Q4_1)"] = (path, "file")
            requantize(shipped, path, quant)
        results = {name: measure(args.morph, path, weights, args.rounds, texts, f"/tmp/gguf_formats_{i}.log")
                   for i, (name, (path, weights)) in enumerate(files.items())}
    base_prefill, base_decode, base_perplexity = results["Q4_1 (shipped)"]
    print(f"SmolLM2-135M-Instruct on `morph serve --task generate` (llama.cpp), {os.cpu_count()} cores "
          f"({cpu_name()}); prefill: {args.rounds} prompts of each length; decode: {len(STORIES)} greedy answers "
          f"of {DECODE_TOKENS} tokens; perplexity over {len(texts)} ShareGPT answers")
    lengths = " | ".join(f"prefill ~{w} tok: ms/tok (÷ Q4_1)" for w in PREFILL_WORDS)
    print(f"| format | {lengths} | decode ms/tok (÷ Q4_1) | perplexity (÷ Q4_1) |")
    print("|---|" + "---:|" * (len(PREFILL_WORDS) + 2))
    for name, (prefill, decode, ppl) in results.items():
        cells = " | ".join(f"{prefill[w]:.2f} ({base_prefill[w] / prefill[w]:.2f}x faster)" for w in PREFILL_WORDS)
        print(f"| {name} | {cells} | {decode:.2f} ({base_decode / decode:.2f}x faster) | {ppl:.3f} ({ppl / base_perplexity:.4f}x) |")


if __name__ == "__main__":
    main()
