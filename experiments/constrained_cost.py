#!/usr/bin/env python3
"""What constrained decoding costs per token: the same prompts answered by one Morph decoder
server free (plain text) and held to a JSON schema (`response_format`), interleaved call by call,
at 1 and at 4 streams at once. Time per output token is measured at the client from a streamed
answer: (last chunk - first chunk) / (completion tokens - 1). Prints a table and the ratio
(goal: at most 1.15x the free time per token).

usage: experiments/constrained_cost.py [--morph target/release/morph] [--rounds 3]
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from servers import cpu_name, default_decoder  # noqa: E402

CITIES = ["Paris", "Lisbon", "Tokyo", "Lima", "Oslo", "Cairo", "Hanoi", "Quito", "Dakar", "Perth", "Riga", "Sofia"]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "country": {"type": "string", "maxLength": 40},
        "population": {"type": "integer", "minimum": 0},
        "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 3},
        "coastal": {"type": "boolean"},
    },
    "required": ["name", "country", "population", "landmarks", "coastal"],
}
MAX_TOKENS = 160


def one(port, city, constrained):
    """Seconds per output token after the first, and the tokens, of one streamed answer."""
    body = {
        "messages": [{"role": "user", "content": f"Describe {city} as a city record with its landmarks."}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    first = last = None
    tokens = 0
    for line in response:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        now = time.perf_counter()
        if chunk.get("choices"):
            first = first or now
            last = now
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    conn.close()
    if tokens < 2 or first is None:
        return None
    return (last - first) / (tokens - 1), tokens


def run(port, streams, rounds):
    """Per-token times of every answer, free and constrained, the two interleaved call by call."""
    times = {False: [], True: []}
    jobs = [(city, constrained) for _ in range(rounds) for city in CITIES for constrained in (False, True)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=streams) as pool:
        for (city, constrained), result in zip(jobs, pool.map(lambda j: one(port, *j), jobs)):
            if result:
                times[constrained].append(result[0])
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--morph", default="target/release/morph")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = default_decoder(args.morph, "/tmp/constrained_cost.log")
    port = server.port
    try:
        one(port, "Rome", True)  # the first grammar walks the vocabulary once
        cpu = cpu_name()
        print(f"SmolLM2-135M (Q4_1) on Morph's llama.cpp decoder, {os.cpu_count()} cores ({cpu}), {args.rounds} rounds of {len(CITIES)} prompts")
        print("| streams | free ms/token | JSON schema ms/token | constrained / free |")
        print("|---:|---:|---:|---:|")
        for streams in (1, 4):
            times = run(port, streams, args.rounds)
            free, held = statistics.mean(times[False]) * 1e3, statistics.mean(times[True]) * 1e3
            print(f"| {streams} | {free:.2f} | {held:.2f} | {held / free:.3f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
