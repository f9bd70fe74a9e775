#!/usr/bin/env python3
"""Multi-turn goodput: ShareGPT conversations replayed round by round (`morph bench --endpoint
chat --conversations`) against `morph serve --task generate` (its prompt cache on, the default)
and llama.cpp's `llama-server` (its prompt cache on, its default), one server at a time, the
same client, the same GGUF, slots and cores (see servers.py).

With --cv, conversations arrive in bursts (Gamma gaps of that coefficient of variation) at the
same mean rates. Each server is started once and serves every rate in turn (neither is restarted between rates,
so each keeps what its cache holds, as a deployed server does); each rate replays other
conversations (the seed moves with the rate). Conversations arrive as a Poisson process; each
round is sent after the previous answer and an exponential think time; its history is the user's
earlier turns and the server's own answers. Per rate it reports TTFT and TPOT by round, the
prompt tokens each server says it had cached, and goodput: rounds answered with TTFT <= 1 s and
TPOT <= 100 ms, per second, and whether the run's p99s were within both.

    experiments/multiturn_vs_llama_server.py [--llama-server $MORPH_PEERS/bin/llama-server] \
        [--rates 0.04,0.08,0.12] [--duration 60] [--slots 4] [--max-tokens 128] [--deadlines]

(llama-server built from llama.cpp's source: experiments/peers.md). Without a llama-server
only Morph runs. Results are
also written to experiments/out/multiturn.json.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys

from servers import server_args, Server, decoder_argv, free_port, warm_up, parse_server_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The TTFT target of goodput (`morph bench --conversations`), and the deadline `--deadlines` sets.
TTFT_TARGET_MS = 1000


def bench(args, port, rate, seed):
    """One replay run at `rate` conversations/s against the server on `port`: its JSON report."""
    argv = [args.morph, "bench", "--url", f"http://127.0.0.1:{port}", "--endpoint", "chat",
            "--conversations", "--sharegpt", args.sharegpt, "--max-tokens", str(args.max_tokens),
            "--rate", str(rate), "--duration", str(args.duration), "--think-s", str(args.think_s),
            "--max-rounds", str(args.max_rounds), "--timeout", "600", "--seed", str(seed), "--json"]
    if args.cv is not None:
        argv += ["--cv", str(args.cv)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)[0]


def num(value, spec):
    """`value` right-aligned to `spec`'s width (width.decimals), or '-' where it is undefined."""
    width, decimals = int(spec), round(spec % 1 * 10)
    return f"{value:>{width}.{decimals}f}" if value is not None else f"{'-':>{width}}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    server_args(ap, ROOT)
    ap.add_argument("--rates", default="0.04,0.08,0.12", help="conversations per second")
    ap.add_argument("--duration", type=float, default=60, help="seconds of conversation arrivals per rate")
    ap.add_argument("--think-s", type=float, default=2.0)
    ap.add_argument("--cv", type=float, default=None,
                    help="conversation arrivals in bursts: Gamma gaps with this coefficient of "
                         "variation (default Poisson, CV 1)")
    ap.add_argument("--max-rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", default="turns,prefix",
                    help="Morph's --prompt-cache-reuse modes to run, one server each")
    ap.add_argument("--policies", default="fcfs",
                    help="Morph's policies to run with each reuse mode: fcfs (the default) and/or ssjf "
                         "(cache-aware shortest job first; --predictor none: every round has the same "
                         "max_tokens, so its uncached prefill orders it)")
    ap.add_argument("--step-tokens", type=int, default=None,
                    help="also run each Morph server with a step budget of this many tokens, decodes "
                         "first (the policy's `step.tokens`: chunked prefill under a token budget)")
    ap.add_argument("--deadlines", action="store_true",
                    help="also run each Morph server with --deadline-ms at the TTFT target (1 s): a "
                         "round that has not started by then is given up (504), which ends its "
                         "conversation as a refused round does")
    ap.add_argument("--prefill-weights", default="q8_0",
                    help="Morph's --prefill-weights settings to run, one server each: q8_0 (the "
                         "default: prompts on an 8-bit copy of a Q4_1 file) and/or file")
    ap.add_argument("--morph-args", default="", help="extra `morph serve` arguments")
    ap.add_argument("--policy-params", default="{}",
                    help="JSON written over every Morph server's policy parameters, e.g. "
                         "'{\"aging\": {\"factor\": 4}}' (--morph-args cannot carry it: the "
                         "batching is passed as --policy-params already)")
    ap.add_argument("--llama-args", default="", help="extra llama-server arguments")
    args = parse_server_args(ap)

    policy_args = {"fcfs": "", "ssjf": "--policy ssjf --predictor none"}
    servers = {}
    steps = [None] + ([args.step_tokens] if args.step_tokens else [])
    deadlines = [False] + ([True] if args.deadlines else [])
    for policy, reuse, weights, step, deadline in itertools.product(
            args.policies.split(","), args.reuse.split(","), args.prefill_weights.split(","), steps, deadlines):
        name = f"morph {reuse}" + ("" if policy == "fcfs" else f" {policy}")
        name += "" if weights == "q8_0" else f" prefill-{weights}"
        name += "" if step is None else f" step-{step}"
        name += " deadline" if deadline else ""
        extra = f"--prompt-cache-reuse {reuse} {policy_args[policy]} --prefill-weights {weights} {args.morph_args}"
        extra += f" --deadline-ms {TTFT_TARGET_MS}" if deadline else ""
        params = json.loads(args.policy_params) | ({} if step is None else {"step": {"tokens": step}})
        servers[name] = ("morph", args.morph, extra, params)
    if args.llama_server:
        servers["llama-server"] = ("llama-server", args.llama_server, args.llama_args, None)
    os.makedirs(os.path.join(ROOT, "experiments/out"), exist_ok=True)
    rates = [float(r) for r in args.rates.split(",")]
    models = os.path.basename(args.gguf) + (f" (llama-server: {os.path.basename(args.llama_gguf)})"
                                            if args.llama_gguf else "")
    print(f"{models}; ShareGPT conversations (heldout, 2-{args.max_rounds} rounds), greedy, "
          f"max_tokens {args.max_tokens}, think {args.think_s:g} s, {args.slots} slots; "
          f"{args.duration:.0f} s of arrivals per rate, "
          f"{'Poisson' if args.cv is None else f'Gamma CV {args.cv:g}'}; {os.cpu_count()} cores")
    results = {}
    for name, (kind, binary, extra, params) in servers.items():
        port = free_port()
        runs = []
        with open(os.path.join(ROOT, f"experiments/out/{name.replace(' ', '-')}-multiturn.log"), "w") as log:
            gguf = (args.llama_gguf or args.gguf) if kind == "llama-server" else args.gguf
            argv = decoder_argv(kind, binary, gguf, args.slots, port, extra, params)
            server = Server(argv, port, log)
            try:
                warm_up(port)
                for i, rate in enumerate(rates):
                    r = bench(args, port, rate, args.seed + 1000 * i)
                    runs.append(r)
                    g = r["generation"]
                    print(f"\n{name} at {rate:g} conversations/s: {r['rounds_answered']}/{r['rounds_sent']} rounds, "
                          f"goodput {g['goodput_rps']:.3f} rounds/s, TTFT p99 {g['ttft_p99_ms']:.0f} ms, "
                          f"TPOT p99 {g['tpot_p99_ms']:.1f} ms, p99s within targets: {g['within_targets']}")
                    print(f"  {'round':>5} {'answered':>8} {'TTFT p50':>9} {'p99':>7} {'TPOT p50':>9} {'p99':>6} "
                          f"{'prompt':>7} {'cached':>7}")
                    for row in r["by_round"]:
                        cells = [num(row[k], f) for k, f in [("ttft_p50_ms", 9.0), ("ttft_p99_ms", 7.0),
                                 ("tpot_p50_ms", 9.1), ("tpot_p99_ms", 6.1), ("prompt_tokens", 7.0),
                                 ("cached_tokens", 7.0)]]
                        print(f"  {row['round']:>5} {row['answered']:>8} " + " ".join(cells), flush=True)
            finally:
                server.stop()
        results[name] = runs
    print()
    ours = [n for n in servers if n.startswith("morph")]
    ratios = [f"{n} / llama" for n in ours] if "llama-server" in servers else []
    print("goodput, rounds/s with TTFT <= 1 s and TPOT <= 100 ms")
    print(f"{'rate':>6} " + " ".join(f"{n:>18}" for n in servers) + " " + " ".join(f"{r:>22}" for r in ratios))
    for i, rate in enumerate(rates):
        goodput = {n: results[n][i]["generation"]["goodput_rps"] for n in servers}
        line = f"{rate:>6g} " + " ".join(f"{goodput[n]:>18.3f}" for n in servers)
        for n in ours if ratios else []:
            theirs = goodput["llama-server"]
            line += f" {goodput[n] / theirs:>21.2f}x" if theirs else f" {'-':>22}"
        print(line)
    # Goodput divides by each run's own wall time, so a server can serve at most the rounds sent:
    # a goodput ratio above sent / within is out of reach at that rate.
    print("\nrounds within both targets / rounds sent (refused: 429, or given up past a deadline: 504)")
    print(f"{'rate':>6} " + " ".join(f"{n:>18}" for n in servers))
    for i, rate in enumerate(rates):
        runs = {n: results[n][i] for n in servers}
        cells = [f"{round(r['generation']['goodput_rps'] * r['wall_s'])}/{r['rounds_sent']}"
                 + (f" ({r['rounds_sent'] - r['rounds_answered']} refused)" if r['rounds_answered'] < r['rounds_sent'] else "")
                 for r in runs.values()]
        print(f"{rate:>6g} " + " ".join(f"{c:>18}" for c in cells))
    with open(os.path.join(ROOT, "experiments/out/multiturn.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
