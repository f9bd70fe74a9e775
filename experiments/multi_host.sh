#!/usr/bin/env bash
# Morph on three hosts: network namespaces joined by veth pairs (needs root) stand in for a
# server host (etcd and `morph serve`) and two worker hosts (`morph agent` each); the
# model is all-MiniLM-L6-v2 cut into 2 pipeline stages, one replica of each stage per host.
# Measured:
#   1. time from starting the agents to the first request served on them, and each replica's
#      start (cold from disk, then warm from the host's cache once the server restarts);
#   2. per-hop latency: one short sentence at a time (closed loop), the same 2-stage pipeline
#      with its stage workers across hosts (TCP over veth) vs on the server's host (Unix
#      sockets) vs threads; a request makes 2 hops (one per stage);
#   3. a host killed (every process SIGKILLed) and a host cut off (its link down) under a
#      steady 30 req/s: time to find it dead (from the server's log), the slowest request sent
#      around it, errors.
#   sudo experiments/multi_host.sh [LEASE_TTL_S]
# The servers' and first agent's logs land in experiments/out/multi_host/; KEEP=1 keeps the
# scratch folder (every process's output).
set -euo pipefail
cd "$(dirname "$0")/.."
ttl=${1:-2}
cargo build --release -q -p morph-cli
bin=$PWD/target/release/morph
out=experiments/out/multi_host
mkdir -p "$out"
tmp=$(mktemp -d)
tag=$$
srv=morphx$tag h1=morphy$tag h2=morphz$tag

cleanup() {
  for ns in $srv $h1 $h2; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  # A namespace is destroyed once its last socket is gone (a minute, for TIME_WAIT): its link's
  # end here goes now, or its address would shadow the next run's.
  ip link del mh${tag}a1 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT

# link NS_A IP_A NS_B IP_B: a veth pair, a /30 (NS_A "-" is this namespace).
n=0
link() {
  n=$((n + 1))
  local a=mh${tag}a$n b=mh${tag}b$n
  ip link add "$a" type veth peer name "$b"
  if [ "$1" = - ]; then ip addr add "$2/30" dev "$a"; ip link set "$a" up
  else ip link set "$a" netns "$1"; ip -n "$1" addr add "$2/30" dev "$a"; ip -n "$1" link set "$a" up; fi
  ip link set "$b" netns "$3"; ip -n "$3" addr add "$4/30" dev "$b"; ip -n "$3" link set "$b" up
  echo "$b"
}
for ns in $srv $h1 $h2; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
srv_ip=10.233.1.1
link - 10.233.1.2 $srv $srv_ip >/dev/null
link $srv 10.233.2.1 $h1 10.233.2.2 >/dev/null
h2_dev=$(link $srv 10.233.3.1 $h2 10.233.3.2)
ip -n $h1 route add default via 10.233.2.1
ip -n $h2 route add default via 10.233.3.1
adv=10.233.2.1 # the server's host, as both worker hosts reach it

(ip netns exec $srv etcd --data-dir "$tmp/etcd" --listen-client-urls http://0.0.0.0:2379 \
  --advertise-client-urls http://$adv:2379 --listen-peer-urls http://127.0.0.1:2380 >"$tmp/etcd.log" 2>&1 &)
etcd=http://$adv:2379
for _ in $(seq 100); do curl -sf http://$srv_ip:2379/health >/dev/null && break; sleep 0.1; done

model=$("$bin" fetch 2>/dev/null | sed -n 1p) # the default model's folder (fetched if missing)
pipeline=(--engine ort --runtime dynamic:128x8 --stages 2 --instances 2 --threads 1 --policy dynamic-batching)
cluster=(--etcd $etcd --cluster bench --advertise $adv --hosts 2 --lease-ttl-s "$ttl" --wait-hosts-s 120)

agent() { # NS NAME IP (not a job of this shell: killed with its namespace's processes)
  (ip netns exec "$1" "$bin" agent --etcd $etcd --cluster bench --host-name "$2" --advertise "$3" \
    --slots 2 --model "$model" --lease-ttl-s "$ttl" >"$tmp/agent-$2.out" 2>"$tmp/agent-$2.err" &)
}
server_pid=
serve() { # ARGS...: morph serve in the server's namespace on port 8080
  ip netns exec $srv "$bin" serve --host 0.0.0.0 --port 8080 "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server_pid=$!
}
ready() { for _ in $(seq 1200); do curl -sf -o /dev/null http://$srv_ip:8080/health && return; sleep 0.05; done; echo "server not ready" >&2; cat "$tmp/serve.err" >&2; exit 1; }
stop() { kill -TERM $server_pid; wait $server_pid 2>/dev/null || true; }
url=http://$srv_ip:8080
body='{"input":["a short sentence, sent on its own"]}'
now() { date +%s.%N; }

starts() { # LABEL: each replica's start from /info
  curl -s $url/info | python3 -c "
import json, sys
for w in json.load(sys.stdin)['workers']['instances']:
    s = w['start']
    print(f\"  {sys.argv[1]:<6} {w['unit']:<32} {str(w.get('host')):<8} {s['kind']:<5} {s['total_ms']:8.1f} ms (spawn {s['spawn_ms']:.1f}, read {s['read_ms']:.1f}, build {s['build_ms']:.1f}, session {s['session_ms']:.1f})\")
" "$1"
}

echo "== 1. from the agents' start to the first request served on them (lease TTL ${ttl}s)"
serve --model "$model" "${pipeline[@]}" "${cluster[@]}"
sleep 1
t0=$(now)
agent $h1 h1 10.233.2.2
agent $h2 h2 10.233.3.2
until curl -sf -o /dev/null -H 'content-type: application/json' -d "$body" $url/v1/embeddings; do sleep 0.02; done
t1=$(now)
first=$(python3 -c "print(f'{($t1 - $t0) * 1e3:.0f}')")
echo "  agents started -> first request served: $first ms (registration, 4 replicas started cold in turn, 1 request)"
starts cold
stop
cp "$tmp/serve.err" "$out/first_start_server.log"
cp "$tmp/agent-h1.err" "$out/first_start_agent_h1.log"
serve --model "$model" "${pipeline[@]}" "${cluster[@]}"
ready
starts warm

echo "== 2. per-hop latency: 3 servers side by side, one sentence at a time to each in turn (600 rounds)"
serve_on() { # PORT ARGS...: another server in the server's namespace
  local port=$1; shift
  ip netns exec $srv "$bin" serve --host 0.0.0.0 --port "$port" "$@" >"$tmp/serve-$port.out" 2>"$tmp/serve-$port.err" &
  extra+=($!)
  for _ in $(seq 1200); do curl -sf -o /dev/null http://$srv_ip:$port/health && return; sleep 0.05; done
}
extra=()
serve_on 8081 --model "$model" "${pipeline[@]}" --workers process
serve_on 8082 --model "$model" "${pipeline[@]}"
python3 - "$srv_ip" "$body" <<'PY'
import statistics, sys, time, urllib.request
ip, body = sys.argv[1], sys.argv[2].encode()
servers = {"stages on 2 other hosts (TCP, veth)": 8080, "stages on this host (Unix sockets)": 8081, "stages as threads of the server": 8082}
def call(port):
    req = urllib.request.Request(f"http://{ip}:{port}/v1/embeddings", body, {"content-type": "application/json"})
    t = time.perf_counter(); urllib.request.urlopen(req).read(); return (time.perf_counter() - t) * 1e3
for _ in range(30):
    for port in servers.values(): call(port)
ms = {label: [] for label in servers}
for _ in range(600):
    for label, port in servers.items(): ms[label].append(call(port))
for label, v in ms.items():
    q = statistics.quantiles(v, n=10)
    print(f"  {label:<36} p50 {statistics.median(v):6.2f} ms  p90 {q[8]:6.2f} ms")
remote, local = ms["stages on 2 other hosts (TCP, veth)"], ms["stages on this host (Unix sockets)"]
paired = statistics.median(r - l for r, l in zip(remote, local))
print(f"  per hop across hosts vs within one host: {paired / 2 * 1e3:+.0f} us (median of paired differences / 2 hops)")
PY
for pid in "${extra[@]}"; do kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; done
stop

echo "== 3. a host lost under load (40 req/s; one replica per stage: stage 0 on h1, stage 1 on h2, so every"
echo "   request crosses h2 and its loss is felt; the policy relaunches the lost stage on h1)"
single=(--engine ort --runtime dynamic:128x8 --stages 2 --instances 1 --threads 1 --policy dynamic-batching)
load() { # SECONDS FILE: open-loop load, one line per request: sent, latency ms, status
  python3 - "$url" "$body" "$1" "$2" <<'PY'
import sys, threading, time, urllib.request, urllib.error
url, body, seconds, path = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3]), sys.argv[4]
rows, lock = [], threading.Lock()
def call(sent):
    req = urllib.request.Request(url + "/v1/embeddings", body, {"content-type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=60).read(); status = 200
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception:
        status = 0
    with lock:
        rows.append((sent, (time.time() - sent) * 1e3, status))
threads, start = [], time.time()
while time.time() - start < seconds:
    t = threading.Thread(target=call, args=(time.time(),)); t.start(); threads.append(t)
    time.sleep(1 / 40)
for t in threads: t.join()
with open(path, "w") as f:
    for r in sorted(rows): f.write(f"{r[0]:.6f} {r[1]:.3f} {r[2]}\n")
PY
}
report() { # LABEL EVENT_TIME LOG_PATTERN LOADFILE
  python3 - "$@" "$tmp/serve.err" <<'PY'
import datetime, re, sys
label, event, pattern, loadfile, log = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
strip = re.compile(r"\x1b\[[0-9;]*m")
found = None
for line in open(log):
    line = strip.sub("", line)
    if re.search(pattern, line):
        stamp = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
        if stamp >= event - 0.01:
            found = stamp; break
rows = [l.split() for l in open(loadfile)]
errors = sum(1 for r in rows if r[2] != "200")
around = [float(r[1]) for r in rows if event - 3 <= float(r[0]) <= event + 3]
usual = sorted(float(r[1]) for r in rows if float(r[0]) < event - 1)
slow = sum(1 for r in rows if float(r[1]) > 100)
det = f"{(found - event) * 1e3:5.0f} ms" if found else "not seen"
print(f"  {label:<26} found dead after {det}; slowest request {max(around):5.0f} ms (p50 before {usual[len(usual)//2]:.1f} ms), {slow} over 100 ms; {len(rows)} requests, {errors} errors")
PY
}
serve --model "$model" "${single[@]}" "${cluster[@]}"
ready
load 8 "$tmp/kill.txt" & loader=$!
sleep 3
t_kill=$(now)
for pid in $(ip netns pids $h2); do kill -KILL "$pid"; done
wait $loader
report "host killed (SIGKILL)" "$t_kill" "worker lost|registration is gone" "$tmp/kill.txt"
stop
agent $h2 h2 10.233.3.2
sleep 1
serve --model "$model" "${single[@]}" "${cluster[@]}"
ready
load 10 "$tmp/cut.txt" & loader=$!
sleep 3
t_cut=$(now)
ip -n $h2 link set "$h2_dev" down
wait $loader
report "host cut off (link down)" "$t_cut" "worker lost|registration is gone" "$tmp/cut.txt"
stop
cp "$tmp/serve.err" "$out/last_server.log"
