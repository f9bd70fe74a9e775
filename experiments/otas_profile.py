#!/usr/bin/env python3
"""OTAS's profile of Morph's token plans (issue 15; the paper's Fig. 4 and Fig. 7), from what
`morph train adapt --profile-out assets/profiles/otas` and `morph profile --dynamic --plan P` wrote:

- accuracy per task and plan on the profiling and the test split (Fig. 4a);
- throughput per plan at batch 32 (Fig. 4b), and by batch size at 32 tokens (Fig. 7);
- the Pareto set (mean profiling accuracy over the tasks against latency at 32 x 64), which is
  the plan list OTAS runs with, beside the paper's own list (ToMe merging below the plain model);
- the ceiling of any policy over each fixed plan: the utility if every request were answered on
  time by the plan most accurate on the test split for its task, over the fixed plan's if it
  answered every request on time, for the shipped scenarios' query types (drawn uniformly; a
  task's utility per request is the mean of its types').

Usage: python3 experiments/otas_profile.py [assets/profiles/otas | assets/profiles/otas_mpnet]
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "assets/profiles/otas")
acc = json.loads((root / "accuracy.json").read_text())
tasks, plans = acc["tasks"], acc["plans"]


def name(plan):
    kind, _, n = plan.partition(":")
    if kind == "prune":
        after, pct = n.split("@")
        return f"prune {pct}% after {after}"
    return {
        "plain": "plain",
        "exit": f"exit after {n}",
        "merge": f"ToMe r={n}",
        "prompt": f"prompts {n} (additive)",
        "prompt-replace": f"prompts {n} (replace)",
    }[kind]


def latency(plan):
    path = root / f"latency_{plan}.json"
    return json.loads(path.read_text())["latency"] if path.exists() else None


print("Accuracy by task and plan (profiling split / test split)\n")
print("| plan | form | " + " | ".join(tasks) + " | mean profiling | mean test |")
print("|---|---|" + "---:|" * (len(tasks) + 2))
for p in plans:
    prof, test = acc["profiling"][p], acc["test"][p]
    cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in zip(prof, test))
    print(f"| {name(p)} | {p} | {cells} | {sum(prof) / len(prof):.4f} | {sum(test) / len(test):.4f} |")

print("\nThroughput (requests/s) at batch 32 by padded length, and by batch size at 32 tokens\n")
lengths, batches = ["16", "32", "64", "128"], ["1", "4", "8", "16", "32"]
print("| plan | " + " | ".join(f"32x{n}" for n in lengths) + " | " + " | ".join(f"{b}x32" for b in batches) + " | vs plain at 32x64 |")
print("|---|" + "---:|" * (len(lengths) + len(batches) + 1))
plain = latency("plain")
rows = []
for p in plans:
    lat = latency(p)
    if lat is None:
        continue
    by_len = [32 * 1000 / lat["32"][n] for n in lengths]
    by_batch = [int(b) * 1000 / lat[b]["32"] for b in batches]
    speed = plain["32"]["64"] / lat["32"]["64"]
    print(f"| {name(p)} | " + " | ".join(f"{x:.0f}" for x in by_len + by_batch) + f" | {speed:.2f}x |")
    mean_prof = sum(acc["profiling"][p]) / len(tasks)
    rows.append((lat["32"]["64"], mean_prof, p))

pareto = []
for ms, a, p in sorted(rows):
    if not pareto or a > pareto[-1][1]:
        pareto.append((ms, a, p))
print("\nPareto set (fastest first: no plan is both faster and more accurate on the profiling split):")
print("  " + ", ".join(f"{p} ({name(p)}: {ms:.0f} ms at 32x64, {a:.4f})" for ms, a, p in pareto))
print("The paper's list on this model: ToMe merging and the plain model: " + ", ".join(p for p in plans if p == "plain" or p.startswith("merge:")))

# Utility per request of each task under the shipped scenarios' query types (tight, loose SLO).
UTILITY = {"sst2": (1.0 + 0.2) / 2, "ag_news": (0.3 + 0.01) / 2, "sms_spam": (0.3 + 0.01) / 2}
weights = [UTILITY[t] for t in tasks]
best = [max(acc["test"][p][k] for p in plans) for k in range(len(tasks))]
ceiling = sum(w * a for w, a in zip(weights, best))
print("\nCeiling of any policy over each fixed plan (every request on time, on the test split's most "
      "accurate plan for its task):")
print("  " + ", ".join(f"{p} {ceiling / sum(w * a for w, a in zip(weights, acc['test'][p])):.3f}x" for p in plans))
