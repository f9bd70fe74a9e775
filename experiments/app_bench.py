#!/usr/bin/env python3
"""A search/RAG application on one host, served by several setups on the same cores, side by side.

One application request is three calls made as an application makes them, each after the last
answered: the embedding of a short query (TEI's `POST /embed`), the reranking of 20-50 candidate
passages by a cross-encoder (TEI's `POST /rerank`), and a chat completion of at most 100 tokens
that answers the query from the top three passages (`POST /v1/chat/completions`, greedy). The
queries are AG News titles and the passages AG News descriptions (rows 3000 on of
../shared/data/text/ag_news/train.csv, which no Morph setting was tuned on).

Loads (application requests arrive open-loop; each run is measured from t = 0, the servers just
started, every refused, failed or timed-out call counted as lost):
  poisson   Poisson arrivals at --rate
  bursty    gamma inter-arrivals of CV 4 at the same mean rate
  bursty10  gamma inter-arrivals of CV 10 at the same mean rate (a few dense bursts per run)
  shifting  an indexing phase (the first half: bulk /embed calls of 32 passages at --index-rate
            per second, and questions at a fifth of --rate), then a question-heavy phase (--rate)

Setups (--setups, comma separated):
  morph-one        one `morph serve --config` of the three models, sharing the cores by load
  morph-three      three single-model Morph servers side by side, unpinned (each on every core)
  morph-pinned     three single-model Morph servers pinned by taskset to a static split of the
                   cores; every split in --splits is run and the best per load is reported
  peers            the real peers as users run them today: TEI for the embedder and for the
                   reranker, llama-server for the generator, side by side, unpinned; the
                   binaries and TEI's model folders from $MORPH_PEERS (experiments/peers.md;
                   int8 exports, Morph's precision, made by experiments/tei_model.py)
  peers-pinned     the same three pinned to each split of --splits, the best per load reported
  SETUP+deadlines  a Morph setup whose reranker and generator give up on calls that can no
                   longer be answered within their SLO (`deadline_ms` = the rerank's and the
                   generation's SLO; 504 at once, counted lost), e.g. morph-one+deadlines,
                   morph-pinned+deadlines (the embedder keeps none: its indexing calls have
                   another SLO than its queries)

A call meets its SLO when it answers 200 within: embed --slo-embed-ms, rerank --slo-rerank-ms,
generation --slo-generate-ms (the whole answer); an indexing call within --slo-index-ms.
Goodput is application requests (questions) whose three calls all met their SLOs, per second of
the run; an indexing call is not an application request, so the indexing calls within their SLO
are counted beside it (and both together, the sittings before 2026-11-30's "goodput", as
"combined"). Printed: a table per load, each setup's goodput, the ratio to the best baseline,
the indexing calls in SLO, each call's p50/p99, and how many calls of each kind broke a
request's SLO (a slow call, or one lost); also written to experiments/out/app_bench.json.

usage: experiments/app_bench.py --reranker DIR [--loads poisson,bursty,shifting] [--rate 0.6]
           [--duration 40] [--setups morph-one,morph-three,morph-pinned,peers,peers-pinned]
       (DIR: a cross-encoder folder, e.g. made by experiments/random_cross_encoder.py; for the
       peers, experiments/tei_model.py DIR $MORPH_PEERS/models/reranker)
"""
import argparse
import csv
import http.client
import json
import os
import random
import sys
import tempfile
import threading
import time

from servers import Server, decoder_argv, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORES = os.cpu_count()
PEERS = os.environ.get("MORPH_PEERS", os.path.expanduser("~/.cache/morph-peers"))
MORPH_HOME = os.environ.get("MORPH_HOME", os.path.expanduser("~/.cache/morph"))
# The candidate passages a question reranks.
MIN_PASSAGES, MAX_PASSAGES = 20, 50
# The generator's sequences at once, for Morph's continuous batch (its default) and llama-server's slots.
GENERATION_SLOTS = 4
# Static splits of a 2-core host: the cores of (embedder, reranker, generator).
SPLITS = {"er0-g1": ("0", "0", "1"), "e0-rg1": ("0", "1", "1"), "eg0-r1": ("0", "1", "0")}


def rows(path, start, count):
    with open(path, newline="") as f:
        out = [(r[1], r[2]) for i, r in enumerate(csv.reader(f)) if i >= start]
    return out[:count]


class Corpus:
    """Queries (titles) and passages (descriptions)."""

    def __init__(self, path, seed):
        self.rows = rows(path, 3000, 3000)
        self.rng = random.Random(seed)

    def request(self):
        title, _ = self.rng.choice(self.rows)
        k = self.rng.randint(MIN_PASSAGES, MAX_PASSAGES)
        passages = [d for _, d in self.rng.sample(self.rows, k)]
        return title, passages

    def documents(self, n):
        return [d for _, d in self.rng.sample(self.rows, n)]


def call(port, path, body, timeout):
    """(status, seconds, answer)"""
    started = time.time()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        conn.close()
        status = response.status
        answer = json.loads(data) if status == 200 else None
    except (OSError, ValueError):
        status, answer = 0, None
    return status, time.time() - started, answer


class Run:
    """One setup under one load: every call's status and time."""

    def __init__(self, ports, slo):
        self.ports, self.slo = ports, slo
        self.lock = threading.Lock()
        self.calls = {"embed": [], "rerank": [], "generate": [], "index": []}
        self.requests = []  # (kind, met SLO, the calls that missed theirs)

    def record(self, kind, status, seconds):
        met = status == 200 and seconds * 1e3 <= self.slo[kind]
        with self.lock:
            self.calls[kind].append((status, seconds))
        return met

    def question(self, query, passages):
        e, r, g = self.ports
        missed = []

        def record(kind, status, s):
            if not self.record(kind, status, s):
                missed.append(kind if status == 200 else f"{kind} lost")

        status, s, _ = call(e, "/embed", {"inputs": query, "truncate": True}, 60)
        record("embed", status, s)
        if status == 200:
            status, s, ranked = call(r, "/rerank", {"query": query, "texts": passages, "truncate": True}, 60)
            record("rerank", status, s)
        if status == 200:
            top = [passages[x["index"]] for x in ranked[:3]]
            prompt = "Answer the question from these passages.\n" + "\n".join(f"- {p}" for p in top)
            prompt += f"\nQuestion: what is this about: {query}?"
            body = {"model": "smollm2", "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": 100, "temperature": 0}
            status, s, _ = call(g, "/v1/chat/completions", body, 120)
            record("generate", status, s)
        with self.lock:
            self.requests.append(("question", not missed, missed))

    def index(self, documents):
        status, s, _ = call(self.ports[0], "/embed", {"inputs": documents, "truncate": True}, 60)
        met = self.record("index", status, s)
        with self.lock:
            self.requests.append(("index", met, [] if met else ["index" if status == 200 else "index lost"]))


def arrivals(load, rate, index_rate, duration, seed):
    """(time, kind) of every arrival, sorted."""
    rng = random.Random(seed)
    out = []

    def stream(kind, per_s, start, end, cv=1.0):
        t = start
        while True:
            mean = 1.0 / per_s
            gap = rng.expovariate(per_s) if cv == 1.0 else rng.gammavariate(1 / cv**2, mean * cv**2)
            t += gap
            if t >= end:
                return
            out.append((t, kind))

    if load == "poisson":
        stream("question", rate, 0, duration)
    elif load == "bursty":
        stream("question", rate, 0, duration, cv=4.0)
    elif load == "bursty10":
        stream("question", rate, 0, duration, cv=10.0)
    elif load == "shifting":
        stream("index", index_rate, 0, duration / 2)
        stream("question", rate / 5, 0, duration / 2)
        stream("question", rate, duration / 2, duration)
    else:
        sys.exit(f"unknown load {load}")
    return sorted(out)


def drive(run, schedule, corpus, duration):
    """Sends the schedule open-loop from t = 0; waits for every call (at most 120 s more)."""
    threads = []
    start = time.time()
    for t, kind in schedule:
        delay = start + t - time.time()
        if delay > 0:
            time.sleep(delay)
        if kind == "question":
            args = corpus.request()
            th = threading.Thread(target=run.question, args=args)
        else:
            th = threading.Thread(target=run.index, args=(corpus.documents(32),))
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout=max(1.0, start + duration + 120 - time.time()))
    return time.time() - start


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summary(run, seconds, duration):
    met = {kind: sum(1 for k, ok, _ in run.requests if k == kind and ok) for kind in ("question", "index")}
    asked = {kind: sum(1 for k, _, _ in run.requests if k == kind) for kind in ("question", "index")}
    missed = {}
    for _, _, calls in run.requests:
        for kind in calls:
            missed[kind] = missed.get(kind, 0) + 1
    out = {"goodput": met["question"] / duration, "questions": asked["question"], "met": met["question"],
           "index_calls": asked["index"], "index_met": met["index"],
           "combined": (met["question"] + met["index"]) / duration, "wall_s": seconds, "missed": missed}
    for kind, calls in run.calls.items():
        if not calls:
            continue
        ok = [s for status, s in calls if status == 200]
        out[kind] = {"calls": len(calls), "lost": len(calls) - len(ok),
                     "p50_ms": percentile(ok, 0.5) * 1e3, "p99_ms": percentile(ok, 0.99) * 1e3}
    return out


def taskset(cores, argv):
    return ["taskset", "-c", cores] + argv if cores else argv


def morph_argv(args, task, port, names, extra=()):
    base = [args.morph, "serve", "--port", str(port), "--served-model-name", names]
    if task == "rerank":
        return base + ["--model", args.reranker, "--max-queue", str(args.rerank_queue)] + list(extra)
    if task == "generate":
        return base + ["--task", "generate"] + list(extra)
    return base + list(extra)


def start_three(args, split, logs, deadlines):
    """Three single-model Morph servers, each pinned to its split's cores (None: unpinned)."""
    ports = [free_port() for _ in range(3)]
    cores = split or (None, None, None)
    rerank, generate = deadline_ms(args, deadlines)
    argvs = [morph_argv(args, "embed", ports[0], "minilm"),
             morph_argv(args, "rerank", ports[1], "reranker", ["--deadline-ms", str(rerank)] if rerank else ()),
             morph_argv(args, "generate", ports[2], "smollm2", ["--deadline-ms", str(generate)] if generate else ())]
    servers = [Server(taskset(c, a), p, logs) for c, a, p in zip(cores, argvs, ports)]
    return servers, ports


def start_peers(args, split, logs):
    """TEI (embedder), TEI (reranker) and llama-server, each pinned to its split's cores (None:
    unpinned)."""
    for model in (args.tei_embedder, args.tei_reranker):
        if not os.path.exists(os.path.join(model, "onnx/model.onnx")):
            sys.exit(f"no {model}/onnx/model.onnx: make it with experiments/tei_model.py (experiments/peers.md)")
    # TEI loads ONNX Runtime by its soname from $MORPH_PEERS/lib (experiments/peers.sh links it).
    library = os.path.join(PEERS, "lib")
    if not os.path.exists(os.path.join(library, "libonnxruntime.so.1")):
        sys.exit(f"no {library}/libonnxruntime.so.1: experiments/peers.sh links it (experiments/peers.md)")
    tei = ["env", f"LD_LIBRARY_PATH={library}", os.path.join(PEERS, "bin/text-embeddings-router")]
    ports = [free_port() for _ in range(3)]
    cores = split or (None, None, None)
    # A TEI call takes at most 32 texts by default; a rerank here sends up to 50 passages, so its
    # user raises the limit (the embedder's indexing calls send 32).
    argvs = [tei + ["--model-id", model, "--hostname", "127.0.0.1", "--port", str(port),
              "--max-client-batch-size", str(MAX_PASSAGES)]
             for model, port in zip((args.tei_embedder, args.tei_reranker), ports)]
    argvs.append(decoder_argv("llama-server", args.llama_server, args.gguf, GENERATION_SLOTS, ports[2]))
    servers = [Server(taskset(c, a), p, logs) for c, a, p in zip(cores, argvs, ports)]
    return servers, ports


def deadline_ms(args, deadlines):
    """The reranker's and the generator's deadline_ms: their calls' SLOs, or none."""
    return (args.slo_rerank_ms, args.slo_generate_ms) if deadlines else (None, None)


def start_one(args, logs, deadlines):
    port = free_port()
    rerank, generate = (f"deadline_ms = {ms}" if ms else "" for ms in deadline_ms(args, deadlines))
    config = os.path.join(tempfile.mkdtemp(), "app.toml")
    with open(config, "w") as f:
        f.write(f"""cores = {CORES}
[[models]]
served_model_name = ["minilm"]
slo_ms = {args.core_slo_ms or args.slo_embed_ms}
[[models]]
model = "{args.reranker}"
served_model_name = ["reranker"]
slo_ms = {args.core_slo_ms or args.slo_rerank_ms}
max_queue = {args.rerank_queue}
{rerank}
{args.reranker_keys}
[[models]]
task = "generate"
served_model_name = ["smollm2"]
slo_ms = {args.core_slo_ms or args.slo_token_ms}
{generate}
{args.decoder_keys}
""")
    server = Server([args.morph, "serve", "--config", config, "--port", str(port)], port, logs)
    return [server], (port, port, port)


def run_setup(args, setup, split, load, corpus_seed, logs):
    base, _, variant = setup.partition("+")
    if variant not in ("", "deadlines") or (variant and base.startswith("peers")):
        sys.exit(f"unknown setup {setup}")
    if base == "morph-one":
        servers, ports = start_one(args, logs, variant == "deadlines")
    elif base.startswith("peers"):
        servers, ports = start_peers(args, split, logs)
    else:
        servers, ports = start_three(args, split, logs, variant == "deadlines")
    slo = {"embed": args.slo_embed_ms, "rerank": args.slo_rerank_ms,
           "generate": args.slo_generate_ms, "index": args.slo_index_ms}
    run = Run(ports, slo)
    try:
        schedule = arrivals(load, args.rate, args.index_rate, args.duration, args.seed)
        seconds = drive(run, schedule, Corpus(args.corpus, corpus_seed), args.duration)
    finally:
        for s in servers:
            s.stop()
    return summary(run, seconds, args.duration)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reranker", required=True)
    ap.add_argument("--loads", default="poisson,bursty,shifting")
    ap.add_argument("--setups", default="morph-one,morph-three,morph-pinned")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--rate", type=float, default=0.6, help="questions per second")
    ap.add_argument("--index-rate", type=float, default=4.0, help="indexing calls per second")
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--slo-embed-ms", type=float, default=200)
    ap.add_argument("--slo-rerank-ms", type=float, default=1500)
    ap.add_argument("--slo-generate-ms", type=float, default=8000)
    ap.add_argument("--slo-index-ms", type=float, default=2000)
    ap.add_argument("--slo-token-ms", type=float, default=100, help="morph-one: the decoder's SLO per token")
    ap.add_argument("--core-slo-ms", type=float, help="morph-one: one SLO for every model's core slack (default: each call's SLO; the decoder's per token)")
    # TEI's reranker admits 512 calls (--max-concurrent-requests) of up to MAX_PASSAGES passages
    # each; Morph's queue counts passages, so its rerankers get the same room.
    ap.add_argument("--rerank-queue", type=int, default=512 * MAX_PASSAGES,
                    help="Morph's rerankers' --max-queue, in passages (default: what TEI's default admits)")
    ap.add_argument("--reranker-keys", default="", help="morph-one: more keys for the reranker's table")
    ap.add_argument("--decoder-keys", default="", help="morph-one: more keys for the decoder's table")
    ap.add_argument("--morph", default=os.path.join(ROOT, "target/release/morph"))
    ap.add_argument("--tei-embedder", default=os.path.join(PEERS, "models/all-MiniLM-L6-v2/int8"),
                    help="peers: the embedder's model folder TEI serves")
    ap.add_argument("--tei-reranker", default=os.path.join(PEERS, "models/reranker/int8"),
                    help="peers: the reranker's model folder TEI serves (tei_model.py of --reranker)")
    ap.add_argument("--llama-server", default=os.path.join(PEERS, "bin/llama-server"))
    ap.add_argument("--gguf", default=os.path.join(
        MORPH_HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--corpus", default=os.path.join(ROOT, "../shared/data/text/ag_news/train.csv"))
    args = ap.parse_args()
    os.makedirs(os.path.join(ROOT, "experiments/out"), exist_ok=True)
    logs = open(os.path.join(ROOT, "experiments/out/app_bench.log"), "w")
    results = {}
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{time.strftime('%Y-%m-%d')}, {CORES} cores ({cpu}); {args.duration:.0f} s a run, questions at "
          f"{args.rate}/s; SLOs embed {args.slo_embed_ms:.0f} ms, rerank {args.slo_rerank_ms:.0f} ms, "
          f"generation {args.slo_generate_ms:.0f} ms, indexing {args.slo_index_ms:.0f} ms")
    for load in args.loads.split(","):
        results[load] = {}
        for setup in args.setups.split(","):
            splits = args.splits.split(",") if setup.split("+")[0].endswith("pinned") else [None]
            for split in splits:
                name = f"{setup}:{split}" if split else setup
                results[load][name] = run_setup(args, setup, SPLITS.get(split), load, args.seed, logs)
                r = results[load][name]
                print(f"  {load:9} {name:22} goodput {r['goodput']:.3f}/s, indexing {r['index_met']} / "
                      f"{r['index_calls']} in SLO", flush=True)
        table(load, results[load])
    with open(os.path.join(ROOT, "experiments/out/app_bench.json"), "w") as f:
        json.dump(results, f, indent=1)


def table(load, runs):
    best = {}
    for name, r in runs.items():
        setup = name.split(":")[0]
        if setup not in best or r["goodput"] > runs[best[setup]]["goodput"]:
            best[setup] = name
    baselines = [runs[n]["goodput"] for s, n in best.items() if not s.startswith("morph-one")]
    top = max(baselines) if baselines else float("nan")
    print(f"\n{load}: goodput (questions/s with all three calls in SLO), indexing calls in SLO, each call's "
          "p50/p99 ms, lost calls")
    print("| setup | goodput | / best baseline | questions in SLO | indexing in SLO | combined /s "
          "| embed p50/p99 | rerank p50/p99 | generate p50/p99 | lost | calls past their SLO |")
    print("|---|---:|---:|---:|---:|---:|---|---|---|---:|---|")
    for setup, name in best.items():
        r = runs[name]
        ratio = f"{r['goodput'] / top:.2f}x" if top == top and top > 0 else "-"
        cells = []
        for kind in ("embed", "rerank", "generate"):
            c = r.get(kind)
            cells.append(f"{c['p50_ms']:.0f} / {c['p99_ms']:.0f}" if c else "-")
        lost = sum(r[k]["lost"] for k in ("embed", "rerank", "generate", "index") if k in r)
        missed = ", ".join(f"{kind} {n}" for kind, n in sorted(r.get("missed", {}).items())) or "none"
        indexing = f"{r['index_met']} / {r['index_calls']}" if r["index_calls"] else "-"
        print(f"| {name} | {r['goodput']:.3f} | {ratio} | {r['met']} / {r['questions']} | {indexing} "
              f"| {r['combined']:.3f} | " + " | ".join(cells) + f" | {lost} | {missed} |")
    print()


if __name__ == "__main__":
    main()
