#!/usr/bin/env python3
"""Whether the tiles of an op run slower on some SMs (or blocks) than on others, and always the same ones, in a WEFT_TRACE.

For every instance of the ops whose output tensor name matches a regex (default: the decode step's linears), each
task's run time (after its wait) over the instance's median; per SM (--by block: per block, i.e. per queue), the
mean of those ratios over the even-numbered and the odd-numbered instances apart (the correlation of the two halves
says whether an SM's speed is its own or chance), the slowest and fastest ones, and per op kind what the slowest
task costs over the mean one (what equal finishing times would save at most, per instance and per step). Blocks
are the same queues in every launch; which SM runs a block is not.

    python3 bench/trace_sm_speed.py trace.json ['gate_up|qkv|h_mlp|h_attn|logits'] [--by block]
"""
import argparse
import collections
import json
import re
import statistics


def correlation(xs, ys):
    if len(xs) < 3:
        return float("nan")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    return sxy / (sx * sy) if sx > 0 and sy > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("pattern", nargs="?", default=r"gate_up|qkv|h_mlp|h_attn|logits",
                    help="regex on the op's output tensor name")
    ap.add_argument("--show", type=int, default=8, help="slowest and fastest SMs (blocks) printed (default 8 each)")
    ap.add_argument("--by", choices=("sm", "block"), default="sm", help="group the tasks by SM (default) or block")
    ap.add_argument("--out", default=None, help="JSON with each SM's (block's) mean ratio")
    args = ap.parse_args()
    pat = re.compile(args.pattern)
    inst = collections.defaultdict(list)  # (step, name) -> [(sm, run us)]
    for e in json.load(open(args.trace))["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") in ("setup", "wait", "notify") or not pat.search(e.get("name", "")):
            continue
        inst[(e["args"]["step"], e["name"])].append((e["args"]["sm"] if args.by == "sm" else e["tid"], e["dur"]))
    if not inst:
        raise SystemExit(f"no task of an op matching '{args.pattern}' in {args.trace}")
    halves = (collections.defaultdict(list), collections.defaultdict(list))
    cost = collections.defaultdict(lambda: [0.0, 0, 0.0])  # kind -> [sum of (max - mean) us, instances, sum of mean]
    steps = set()
    for i, key in enumerate(sorted(inst)):
        runs = inst[key]
        if len(runs) < 8:
            continue
        steps.add(key[0])
        med = statistics.median(d for _, d in runs)
        if med <= 0:
            continue
        for sm, d in runs:
            halves[i % 2][sm].append(d / med)
        kind = re.sub(r"\d+", "*", key[1])
        mean = statistics.fmean(d for _, d in runs)
        c = cost[kind]
        c[0] += max(d for _, d in runs) - mean
        c[1] += 1
        c[2] += mean
    sms = sorted(set(halves[0]) & set(halves[1]))
    even = [statistics.fmean(halves[0][s]) for s in sms]
    odd = [statistics.fmean(halves[1][s]) for s in sms]
    both = {s: statistics.fmean(halves[0][s] + halves[1][s]) for s in sms}
    unit = "SM" if args.by == "sm" else "block"
    print(f"{len(sms)} {unit}s, {sum(c[1] for c in cost.values())} op instances over {len(steps)} steps")
    print(f"per-{unit} run / instance median: correlation of even and odd instances {correlation(even, odd):.2f}")
    ranked = sorted(both, key=both.get)
    print(f"slowest {unit}s: " + "  ".join(f"{s}:{both[s]:.3f}" for s in reversed(ranked[-args.show:])))
    print(f"fastest {unit}s: " + "  ".join(f"{s}:{both[s]:.3f}" for s in ranked[:args.show]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({str(s): both[s] for s in sms}, f)
    print(f"\n{'op kind':40} {'instances':>9} {'mean run us':>11} {'max - mean us':>13} {'per step us':>11}")
    n_steps = max(len(steps), 1)
    for kind, (extra, n, mean_sum) in sorted(cost.items(), key=lambda kv: -kv[1][0]):
        print(f"{kind:40} {n:9d} {mean_sum / n:11.2f} {extra / n:13.2f} {extra / n_steps:11.2f}")


if __name__ == "__main__":
    main()
