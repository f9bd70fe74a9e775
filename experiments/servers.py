"""What the decoder experiments share: a free loopback port, a server process stopped by its
pid, and the two decoder servers' command lines, configured alike: `slots` sequences at once
with 2,048 tokens of context each, on every core."""
import http.client
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on 127.0.0.1:port, stopped by its pid."""

    def __init__(self, argv, port, log):
        self.port = port
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"{argv[0]} exited with {self.proc.returncode}; see {log.name}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        sys.exit(f"{argv[0]} did not become healthy; see {log.name}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def default_decoder(binary, log_path, model=None, extra=()):
    """`morph serve --task generate` on its default settings and model (or the GGUF `model`, and
    the further arguments `extra`), on a free port, warmed up; its output written to `log_path`."""
    port = free_port()
    argv = [binary, "serve", "--task", "generate", "--port", str(port)] + (["--model", model] if model else [])
    argv += list(extra)
    with open(log_path, "w") as log:
        server = Server(argv, port, log)
    warm_up(port)
    return server


WORDS = "the river carried cold water past old mills and quiet towns toward a grey northern sea".split()


def unique_prompt(words, seed):
    """A prompt of about `words` tokens that no other call shares beyond its first words."""
    body = " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words))
    return f"Passage {seed}: {body}"


def timed_completion(port, body):
    """Seconds for one `/v1/completions` call of `body`, and its answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = json.loads(conn.getresponse().read())
    seconds = time.perf_counter() - started
    conn.close()
    return seconds, answer


def cpu_name():
    """The host's CPU model, as every figure names it."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def warm_up(port):
    """One short greedy chat answer, not counted: the first call's one-off costs."""
    body = json.dumps({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "temperature": 0})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    conn.getresponse().read()
    conn.close()


def decoder_argv(name, binary, gguf, slots, port, extra="", params=None):
    """`morph serve --task generate` (`--runtime dynamic:2048xN` and a continuous batch of N, and
    any other policy `params`) or llama-server (`-np N -c N*2048`), each with `extra` arguments
    appended."""
    cores = str(os.cpu_count())
    if name == "morph":
        argv = [binary, "serve", "--task", "generate", "--model", gguf, "--port", str(port),
                "--runtime", f"dynamic:2048x{slots}",
                # The policy's continuous batch defaults to 4 sequences.
                "--policy-params",
                json.dumps({"batching": {"mode": "continuous", "max_batch": slots}, **(params or {})})]
    else:
        argv = [binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-np", str(slots),
                "-c", str(2048 * slots), "-t", cores, "-tb", cores]
    return argv + shlex.split(extra)


def server_args(ap, root, llama_required=False):
    """The arguments every decoder experiment takes: the two servers' binaries, the GGUF both
    serve (the default decoder in MORPH_HOME) and the ShareGPT conversations."""
    peers = os.environ.get("MORPH_PEERS", os.path.expanduser("~/.cache/morph-peers"))
    built = os.path.join(peers, "bin/llama-server")
    if llama_required:
        ap.add_argument("--llama-server", default=built,
                        help=f"path to llama.cpp's llama-server (default {built}; built by "
                             "experiments/build_peers.sh llama-server: experiments/peers.md)")
    else:
        ap.add_argument("--llama-server", default=built if os.path.exists(built) else None,
                        help=f"path to llama.cpp's llama-server (default {built} where it exists, "
                             "else skipped; experiments/build_peers.sh llama-server builds it: "
                             "experiments/peers.md)")
    ap.add_argument("--morph", default=os.path.join(root, "target/release/morph"))
    ap.add_argument("--gguf", default=None,
                    help="the GGUF both serve (default: Morph's default decoder, fetched into "
                         "MORPH_HOME by `morph fetch --task generate` where it is not there yet)")
    ap.add_argument("--llama-gguf", default=None,
                    help="the GGUF llama-server serves, if not --gguf (e.g. a Q8_0 requantization "
                         "of it, to compare with Morph prefilling on its Q8_0 copy)")
    ap.add_argument("--sharegpt", default=os.path.join(root, "../shared/data/conversations/sharegpt.jsonl"))


def parse_server_args(ap):
    """`ap`'s arguments, with `--gguf` resolved: Morph's default decoder where none was named,
    fetched first where MORPH_HOME does not hold it yet."""
    args = ap.parse_args()
    if args.gguf is None:
        fetched = subprocess.run([args.morph, "fetch", "--task", "generate"], check=True,
                                 capture_output=True, text=True)
        args.gguf = fetched.stdout.strip().splitlines()[-1]
    return args
