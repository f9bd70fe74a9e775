#!/usr/bin/env python3
"""Generation serving side by side: `morph serve --task generate` against llama.cpp's own
`llama-server`, one server at a time, the same client and prompts (issue 13's setup): the
first user turns of ShareGPT conversations, greedy, `max_tokens` 128, streamed through
`/v1/chat/completions`, with 1, 4 and 16 clients at once (each sends its next prompt when its
answer ends). Each server gets as many sequences as clients (Morph: `--runtime
dynamic:2048xN` and a continuous batch of N; llama-server: `-np N -c N*2048`, 2,048 tokens a slot) and every core.

Printed per stream count and server: aggregate output tokens/s, mean time to first token,
mean time per output token, the share of prompt tokens the server reports as cached
(`usage.prompt_tokens_details.cached_tokens`), and Morph / llama-server; with `--rounds N`,
N such pairs run back to back (the first server turned each round), then the medians of the
rounds' ratios (TTFT under its column; tokens/s with the rounds' range); then the CPU
kernels each was built with (llama-server's `--version`, and the CMake options of the
llama.cpp Morph links; how llama-server was built goes beside the table, experiments/peers.md). llama-server is not a dependency of Morph: build it from
llama.cpp's source (experiments/build_peers.sh llama-server; experiments/peers.md), then
    experiments/decoder_vs_llama_server.py [--llama-server $MORPH_PEERS/bin/llama-server]
        [--streams 1,4,16] [--prompts 16] [--max-tokens 128] [--rounds 1] [--morph-args '...']
Results are also written to experiments/out/decoder_vs_llama_server.json (a run of one server,
`--servers morph`, to decoder_vs_llama_server.morph.json, so that a probe keeps the comparison).
"""
import argparse
import http.client
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

from servers import server_args, Server, decoder_argv, free_port, parse_server_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def first_turns(path, count, max_chars):
    """The first user turn of the first `count` conversations whose turn is at most `max_chars`."""
    prompts = []
    with open(path) as f:
        for line in f:
            turns = json.loads(line)["turns"]
            if turns and turns[0]["role"] == "user" and len(turns[0]["content"]) <= max_chars:
                prompts.append(turns[0]["content"])
            if len(prompts) == count:
                break
    return prompts


def generate(port, text, max_tokens):
    """One streamed greedy chat completion: (seconds to first token, seconds from first to
    last token, completion tokens, prompt tokens, prompt tokens the server had cached)."""
    body = json.dumps({
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    })
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    first = last = None
    usage = None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        if chunk.get("usage"):
            usage = chunk["usage"]
        if any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
            now = time.perf_counter()
            first = first or now
            last = now
    conn.close()
    if usage is None or first is None:
        raise RuntimeError("the stream ended without tokens or usage")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return first - start, last - first, usage["completion_tokens"], usage["prompt_tokens"], cached


def run(port, prompts, streams, max_tokens):
    """All prompts, `streams` clients at once: tokens/s, mean TTFT ms, mean ms per output token."""
    todo = queue.Queue()
    for p in prompts:
        todo.put(p)
    results, errors = [], []

    def client():
        while True:
            try:
                text = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results.append(generate(port, text, max_tokens))
            except Exception as e:  # reported below; the run is then invalid
                errors.append(str(e))

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        sys.exit(f"{len(errors)} requests failed, e.g. {errors[0]}")
    tokens = sum(r[2] for r in results)
    tpots = [r[1] / (r[2] - 1) for r in results if r[2] > 1]
    return {
        "tokens_per_s": tokens / wall,
        "ttft_ms": 1e3 * sum(r[0] for r in results) / len(results),
        "tpot_ms": 1e3 * sum(tpots) / max(1, len(tpots)),
        "completion_tokens": tokens,
        "prompt_tokens": sum(r[3] for r in results),
        "cached_tokens": sum(r[4] for r in results),
    }


def serve(name, argv, streams, prompts, max_tokens):
    """One run of server `name` (`argv(streams, port)`) over every prompt from `streams` clients."""
    port = free_port()
    with open(os.path.join(ROOT, f"experiments/out/{name}.log"), "w") as log:
        server = Server(argv(streams, port), port, log)
        try:
            generate(port, prompts[0], 8)  # warm-up, not counted
            return run(port, prompts, streams, max_tokens)
        finally:
            server.stop()


def ratio_of(row, key="tokens_per_s"):
    """Morph's `key` over llama-server's in one round, if both ran."""
    if "morph" in row and "llama-server" in row:
        return row["morph"][key] / row["llama-server"][key]
    return None


def print_row(streams, name, r, ratio):
    print(f"{streams:>7} {name:>13} {r['tokens_per_s']:>9.1f} {r['ttft_ms']:>8.0f} "
          f"{r['tpot_ms']:>9.1f} {r['completion_tokens']:>8} "
          f"{r['cached_tokens'] / max(1, r['prompt_tokens']):>7.0%} "
          f"{'' if ratio is None else f'{ratio:.2f}x':>19}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    server_args(ap, ROOT, llama_required=True)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--morph-args", default="", help="extra `morph serve` arguments")
    ap.add_argument("--servers", default="morph,llama-server", help="which of the two to run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each server per stream count, in pairs back to back with the "
                         "first server turned each round; with several, the median of the rounds' "
                         "ratios and their range are printed too")
    args = parse_server_args(ap)

    # About 4 characters a token: first turns that leave room for the answer in 2,048 tokens.
    prompts = first_turns(args.sharegpt, args.prompts, 4000)
    cores = os.cpu_count()
    servers = {
        "morph": lambda n, port: decoder_argv("morph", args.morph, args.gguf, n, port, args.morph_args),
        "llama-server": lambda n, port: decoder_argv("llama-server", args.llama_server,
                                                     args.llama_gguf or args.gguf, n, port),
    }
    os.makedirs(os.path.join(ROOT, "experiments/out"), exist_ok=True)
    table = []
    print(f"{os.path.basename(args.gguf)} (llama-server: {os.path.basename(args.llama_gguf or args.gguf)}), "
          f"{len(prompts)} ShareGPT first turns, greedy, max_tokens {args.max_tokens}, streamed; "
          f"{cores} cores; morph args: {args.morph_args or 'none'}")
    print(f"{'streams':>7} {'server':>13} {'tokens/s':>9} {'TTFT ms':>8} {'ms/token':>9} "
          f"{'out tok':>8} {'cached':>7} {'morph/llama-server':>19}")
    chosen = [name for name in servers if name in args.servers.split(",")]
    for streams in [int(s) for s in args.streams.split(",")]:
        rounds = []
        for r in range(args.rounds):
            # Each round runs the servers back to back, the first one turned each round, so
            # the host's drift falls on both sides of a round's ratio alike.
            order = chosen[r % len(chosen):] + chosen[:r % len(chosen)]
            row = {name: serve(name, servers[name], streams, prompts, args.max_tokens) for name in order}
            for name in chosen:
                print_row(streams, name, row[name], ratio_of(row) if name == "morph" else None)
            rounds.append(row)
        ratios = sorted(x for x in map(ratio_of, rounds) if x is not None)
        ttft = sorted(x for x in (ratio_of(row, "ttft_ms") for row in rounds) if x is not None)
        if len(ratios) > 1:
            # The medians of the rounds' ratios (Morph's over llama-server's): TTFT under its
            # column, tokens/s with its range.
            low, mid, high = ratios[0], statistics.median(ratios), ratios[-1]
            print(f"{streams:>7} {'median of ' + str(len(ratios)):>13} {'':>9} "
                  f"{f'{statistics.median(ttft):.2f}x':>8} {'':>9} {'':>8} {'':>7} "
                  f"{f'{mid:.2f}x ({low:.2f}-{high:.2f})':>19}", flush=True)
        table.append({"streams": streams, "rounds": rounds, "tokens_per_s_ratios": ratios,
                      "ttft_ratios": ttft})
    ran = args.servers.split(",")
    name = "decoder_vs_llama_server" + ("" if set(ran) >= set(servers) else "." + "+".join(ran))
    with open(os.path.join(ROOT, f"experiments/out/{name}.json"), "w") as f:
        json.dump(table, f, indent=1)
    print_builds(args.llama_server)


def print_builds(llama_server):
    """What each server is: llama-server's `--version`, and the CMake options of the llama.cpp
    Morph's decoder links."""
    version = subprocess.run([llama_server, "--version"], capture_output=True, text=True)
    print(f"llama-server: {' / '.join((version.stdout + version.stderr).split(chr(10))[:2])}")
    kernels = subprocess.run([os.path.join(ROOT, "experiments/llama_kernels.sh")], capture_output=True, text=True)
    print(f"morph (llama-cpp-sys-2): {kernels.stdout.strip() or kernels.stderr.strip()}")


if __name__ == "__main__":
    main()
