#!/usr/bin/env python3
"""Generation goodput: a ShareGPT Poisson stream at rising rates against `morph serve --task
generate` and against llama.cpp's `llama-server`, one server at a time, the same client.

The client is `morph bench --endpoint chat`: the recorded ShareGPT rounds SmolLM2 answered
(`assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl`, with the turns before each), greedy,
`max_tokens` the recorded answer's length, streamed, Poisson arrivals. Per run it measures time
to first token (TTFT, from the scheduled send) and time per output token (TPOT, each answer's
first to last token over its tokens after the first). A server's goodput is the highest rate
it served with TTFT p99 and TPOT p99 of the answered requests within the targets (DistServe's
measure), in requests/s answered; a refused request (429) is not served: at TTFT 1 s / TPOT 100 ms (the issue's targets), and at every further TTFT
target of --ttft-targets (on a CPU where the longest prompts' prefill alone takes seconds). Every
rate runs on a freshly started server, so no run finds the prompts of an earlier one cached.

Both servers get the same slots (sequences at once, 2,048 tokens of context each), the same
GGUF and every core (see servers.py). llama-server is not a dependency of Morph: build it from
llama.cpp's source (experiments/build_peers.sh llama-server; experiments/peers.md), then
    experiments/generation_goodput.py [--llama-server $MORPH_PEERS/bin/llama-server]
        [--slots 4,8] [--rates 0.2,0.4,0.6] [--duration 60] [--morph-args '...']
Without --llama-server only Morph runs, and the table says llama-server was skipped.
Results are also written to experiments/out/generation_goodput.json.
"""
import argparse
import json
import os
import subprocess
import sys

from servers import server_args, Server, decoder_argv, free_port, warm_up, parse_server_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPOT_TARGET_MS = 100.0


def bench(args, port, rate, ttft_target_ms):
    """`morph bench --endpoint chat` at `rate` against the server on `port`: its JSON run."""
    argv = [args.morph, "bench", "--url", f"http://127.0.0.1:{port}", "--endpoint", "chat",
            "--lengths", args.lengths, "--sharegpt", args.sharegpt, "--max-tokens", "recorded",
            "--rate", str(rate), "--duration", str(args.duration), "--timeout", "600",
            "--ttft-target-ms", str(ttft_target_ms), "--tpot-target-ms", str(TPOT_TARGET_MS),
            "--seed", str(args.seed), "--json"]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)[0]


def goodput(runs, ttft_target_ms):
    """The highest rate served (answered, 200) among the runs whose answered requests' TTFT p99
    is within `ttft_target_ms` and TPOT p99 within the TPOT target (0 if none). Requests a
    server refused (429) are not served: they count against it only as rate it did not serve."""
    good = [r["throughput_rps"] for r in runs
            if r["generation"]["ttft_p99_ms"] <= ttft_target_ms
            and r["generation"]["tpot_p99_ms"] <= TPOT_TARGET_MS]
    return max(good, default=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    server_args(ap, ROOT)
    ap.add_argument("--lengths", default=os.path.join(
        ROOT, "assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl"))
    ap.add_argument("--rates", default="0.2,0.4,0.6,0.8", help="Poisson rates in requests/s")
    ap.add_argument("--duration", type=float, default=60, help="seconds of arrivals per rate")
    ap.add_argument("--slots", default="4", help="sequences at once, for both servers; comma separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ttft-targets", default="1000,5000",
                    help="TTFT p99 targets in ms to report goodput at (TPOT p99 <= 100 ms each)")
    ap.add_argument("--morph-args", default="", help="extra `morph serve` arguments")
    ap.add_argument("--llama-args", default="", help="extra llama-server arguments")
    args = parse_server_args(ap)

    servers = {"morph": (args.morph, args.morph_args)}
    if args.llama_server:
        servers["llama-server"] = (args.llama_server, args.llama_args)
    os.makedirs(os.path.join(ROOT, "experiments/out"), exist_ok=True)
    ttft_targets = [float(t) for t in args.ttft_targets.split(",")]
    print(f"SmolLM2-135M-Instruct Q4_1; recorded ShareGPT rounds, greedy, max_tokens as recorded, "
          f"streamed; {args.duration:.0f} s of Poisson arrivals per rate; {os.cpu_count()} cores")
    if not args.llama_server:
        print("llama-server: skipped (no --llama-server PATH given)")
    print(f"{'slots':>5} {'server':>13} {'offered':>7} {'served':>7} {'errors':>6} {'tok/s':>6} "
          f"{'TTFT p50':>8} {'p99':>6} {'TPOT p50':>8} {'p99':>6}")
    results = []
    for slots in [int(s) for s in args.slots.split(",")]:
        row = {"slots": slots}
        for name, (binary, extra) in servers.items():
            runs = []
            for rate in [float(r) for r in args.rates.split(",")]:
                port = free_port()
                with open(os.path.join(ROOT, f"experiments/out/{name}.log"), "w") as log:
                    server = Server(decoder_argv(name, binary, args.gguf, slots, port, extra), port, log)
                    try:
                        warm_up(port)
                        r = bench(args, port, rate, ttft_targets[0])
                    finally:
                        server.stop()
                g = r["generation"]
                print(f"{slots:>5} {name:>13} {r['offered_rps']:>7.2f} {r['throughput_rps']:>7.2f} "
                      f"{r['errors']:>6} {g['output_tokens_per_s']:>6.1f} {g['ttft_p50_ms']:>8.0f} "
                      f"{g['ttft_p99_ms']:>6.0f} {g['tpot_p50_ms']:>8.1f} {g['tpot_p99_ms']:>6.1f}", flush=True)
                runs.append(r)
            row[name] = {"goodput_rps": {t: goodput(runs, t) for t in ttft_targets}, "runs": runs}
        results.append(row)
    print()
    for row in results:
        for t in ttft_targets:
            ours = row["morph"]["goodput_rps"][t]
            line = f"slots {row['slots']}, TTFT p99 <= {t / 1e3:g} s, TPOT p99 <= {TPOT_TARGET_MS:g} ms: goodput morph {ours:.2f} req/s"
            if "llama-server" in row:
                theirs = row["llama-server"]["goodput_rps"][t]
                ratio = f"{ours / theirs:.2f}x" if theirs else "n/a (0)"
                line += f", llama-server {theirs:.2f} req/s, morph / llama-server {ratio}"
            print(line)
    with open(os.path.join(ROOT, "experiments/out/generation_goodput.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
