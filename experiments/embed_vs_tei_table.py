"""The table of an embed_vs_tei.sh sitting, from the runs it left under OUT (rerun it on
results a script run left behind, or after adding a server's runs):

    python3 experiments/embed_vs_tei_table.py OUT CORPORA SERVERS SECONDS
"""
import json, sys
out, corpora, servers, seconds = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
def rows(path):
    try:
        return [json.loads(l) for l in open(path)]
    except FileNotFoundError:
        return []
print(f"\nembedding serving, same Poisson streams, {seconds} s runs; saturation = highest rate with no errors and p99 < 500 ms")
print(f"{'corpus':<7} {'server':<19} {'sat req/s':>9} {'p50@80%':>8} {'p99@80%':>8} {'srv CPU':>8} {'cli CPU':>8} {'@1.25x':>7} {'@1.5x':>7}")
sat = {}
for c in corpora:
    for s in servers:
        sweep = rows(f"{out}/{c}.{s}.sweep.jsonl")
        ok = [r for r in sweep if r["errors"] == 0 and r["latency"]["p99_ms"] < 500]
        if not ok:
            continue
        top = max(ok, key=lambda r: r["offered_rps"])
        pts = rows(f"{out}/{c}.{s}.points.jsonl")
        if len(pts) < 3:
            continue
        sat[(c, s)] = (top, pts)
        p80, o125, o15 = pts
        print(f"{c:<7} {s:<19} {top['offered_rps']:>9.1f} {p80['latency']['p50_ms']:>8.1f} {p80['latency']['p99_ms']:>8.1f} "
              f"{100 * top['server_cpu_cores']:>7.0f}% {100 * top['client_cpu_cores']:>7.0f}% "
              f"{o125['throughput_rps']:>7.1f} {o15['throughput_rps']:>7.1f}")
print()
for c in corpora:
    if (c, "morph") in sat and (c, "tei-like") in sat:
        (m, mp), (t, tp) = sat[(c, "morph")], sat[(c, "tei-like")]
        served = [p["throughput_rps"] for p in mp[1:]]
        print(f"{c}: morph / tei-like saturation {m['offered_rps'] / t['offered_rps']:.2f}x; p99 at 80%: morph {mp[0]['latency']['p99_ms']:.0f} ms, "
              f"tei-like {tp[0]['latency']['p99_ms']:.0f} ms; morph served past saturation {min(served):.1f} req/s vs {m['throughput_rps']:.1f} at it")
    for base in ("tei-int8", "tei-int8-morph-bias", "morph-before"):
        if (c, "morph") in sat and (c, base) in sat:
            (m, mp), (t, tp) = sat[(c, "morph")], sat[(c, base)]
            # Past saturation: the mean of what each served at 1.25x and 1.5x of its own saturation
            # (not rounded down to a sweep step, as a saturation rate is).
            past = lambda pts: sum(p["throughput_rps"] for p in pts[1:]) / len(pts[1:])
            print(f"{c}: morph / {base} saturation {m['offered_rps'] / t['offered_rps']:.2f}x, served past saturation "
                  f"{past(mp) / past(tp):.2f}x; p99 at 80%: morph {mp[0]['latency']['p99_ms']:.0f} ms, {base} {tp[0]['latency']['p99_ms']:.0f} ms")
    if (c, "morph") in sat and (c, "morph-fp32") in sat:
        (m, _), (f, fp) = sat[(c, "morph")], sat[(c, "morph-fp32")]
        served = [p["throughput_rps"] for p in fp[1:]]
        print(f"{c}: morph (int8) / morph-fp32 saturation {m['offered_rps'] / f['offered_rps']:.2f}x; morph-fp32 served past saturation {min(served):.1f} req/s vs {f['throughput_rps']:.1f} at it")
