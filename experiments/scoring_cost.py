#!/usr/bin/env python3
"""What scoring a prompt costs (completions' `echo` with `logprobs`, as lm-evaluation-harness'
loglikelihood call sends it: every prompt token's log-probability, `max_tokens` 1) against the
same prompt answered plainly (`max_tokens` 1: its prefill and one token), on one Morph decoder
server, the two interleaved call by call, each call a prompt of its own (no prompt-cache reuse
either way). Prints a table of the mean wall time per call and the ratio, by prompt length.

usage: experiments/scoring_cost.py [--morph target/release/morph] [--rounds 5]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from servers import cpu_name, default_decoder, timed_completion, unique_prompt  # noqa: E402

LENGTHS = (50, 200, 800)  # words: roughly as many tokens


def one(port, text, scored):
    """Seconds for one call, and its prompt's tokens."""
    body = {"prompt": text, "max_tokens": 1, "temperature": 0}
    if scored:
        body.update(echo=True, logprobs=1)
    seconds, answer = timed_completion(port, body)
    if scored:
        assert answer["choices"][0]["logprobs"]["token_logprobs"][0] is None, answer
    return seconds, answer["usage"]["prompt_tokens"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--morph", default="target/release/morph")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = default_decoder(args.morph, "/tmp/scoring_cost.log")
    port = server.port
    try:
        print(f"SmolLM2-135M (Q4_1) on Morph's llama.cpp decoder, {os.cpu_count()} cores ({cpu_name()}), {args.rounds} prompts of each length and mode")
        print("| prompt tokens | plain ms/call | scored ms/call | scored / plain |")
        print("|---:|---:|---:|---:|")
        seed = 0
        for words in LENGTHS:
            times = {False: [], True: []}
            tokens = []
            for _ in range(args.rounds):
                for scored in (False, True):
                    seed += 1
                    seconds, prompt_tokens = one(port, unique_prompt(words, seed), scored)
                    times[scored].append(seconds)
                    tokens.append(prompt_tokens)
            plain, scored = statistics.mean(times[False]) * 1e3, statistics.mean(times[True]) * 1e3
            print(f"| {statistics.mean(tokens):.0f} | {plain:.1f} | {scored:.1f} | {scored / plain:.2f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
