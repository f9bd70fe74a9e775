"""The table of an embed_vs_tei.sh sitting, from the runs it left under OUT (rerun it on
results a script run left behind, or after adding a server's runs):

    python3 experiments/embed_vs_tei_table.py OUT CORPORA SERVERS SECONDS [PEER_VERSIONS]
"""
import json, platform, statistics, subprocess, sys
out, corpora, servers, seconds = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
versions = sys.argv[5] if len(sys.argv) > 5 else ""
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
def rows(path):
    try:
        return [json.loads(l) for l in open(path)]
    except FileNotFoundError:
        return []
def p99_at_80(c, s, pts):
    """p99 at 80% of saturation: the median over the runs there (P80_ROUNDS), else the one run."""
    runs = rows(f"{out}/{c}.{s}.p80.jsonl") or pts[:1]
    return statistics.median(r["latency"]["p99_ms"] for r in runs)
print(f"\nembedding serving, same Poisson streams, {seconds} s runs; saturation = highest rate of any run with no errors and p99 < 500 ms; p99@80%: median of the runs there (80% of the sweep's saturation)")
print(f"host: {cpu or platform.processor()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores; peers: {versions}")
print(f"{'corpus':<7} {'server':<19} {'sat req/s':>9} {'p50@80%':>8} {'p99@80%':>8} {'srv CPU':>8} {'cli CPU':>8} {'@1.25x':>7} {'@1.5x':>7}")
sat = {}
for c in corpora:
    for s in servers:
        sweep = rows(f"{out}/{c}.{s}.sweep.jsonl")
        pts = rows(f"{out}/{c}.{s}.points.jsonl")
        # Saturation: the highest rate any run kept up with, the runs past the sweep's
        # saturation included (a server whose p99 wanders over 500 ms in one sweep run and
        # keeps up at 1.5x it later has served that rate).
        ok = [r for r in sweep + pts if r["errors"] == 0 and r["latency"]["p99_ms"] < 500]
        if not ok or len(pts) < 3:
            continue
        top = max(ok, key=lambda r: r["offered_rps"])
        sat[(c, s)] = (top, pts)
        p80, o125, o15 = pts
        print(f"{c:<7} {s:<19} {top['offered_rps']:>9.1f} {p80['latency']['p50_ms']:>8.1f} {p99_at_80(c, s, pts):>8.1f} "
              f"{100 * top['server_cpu_cores']:>7.0f}% {100 * top['client_cpu_cores']:>7.0f}% "
              f"{o125['throughput_rps']:>7.1f} {o15['throughput_rps']:>7.1f}")
print()
# Past saturation: the mean of what a server served at 1.25x and 1.5x of its own saturation
# (not rounded down to a sweep step, as a saturation rate is).
past = lambda pts: sum(p["throughput_rps"] for p in pts[1:]) / len(pts[1:])
# Morph's own rows (its defaults, and each precision where it ran) against every baseline that ran.
ours = ("morph", "morph-int8", "morph-fp32")
for c in corpora:
    for o in ours:
        if (c, o) not in sat:
            continue
        (m, mp) = sat[(c, o)]
        print(f"{c}: {o} served past saturation {min(p['throughput_rps'] for p in mp[1:]):.1f} req/s, "
              f"{min(p['throughput_rps'] for p in mp[1:]) / m['throughput_rps']:.2f}x what it served at saturation")
        for base in ("tei", "tei-fp32", "morph-like-tei", "morph-before", "morph-fp32"):
            if base != o and (c, base) in sat:
                (t, tp) = sat[(c, base)]
                print(f"{c}: {o} / {base} saturation {m['offered_rps'] / t['offered_rps']:.2f}x, served past saturation "
                      f"{past(mp) / past(tp):.2f}x; p99 at 80%: {o} {p99_at_80(c, o, mp):.0f} ms, {base} {p99_at_80(c, base, tp):.0f} ms")
