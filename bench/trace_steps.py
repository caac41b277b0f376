#!/usr/bin/env python3
"""The steps of a multi-step WEFT_TRACE (weft_generate --mode loop): each step's span and the gap before it, then
two steps compared op instance by op instance (step A's share of the critical path against step B's, and their
tasks' median run), the largest differences first.

A launch's first step is its slowest: round 37 (docs/perf.md) traced it 12-43 us longer than the loop's later
steps, most of it in the first layers' bandwidth-bound projections — what every step of a one-launch-per-step run
pays.

    python3 bench/trace_steps.py trace.json [--steps A B] [--top N]
"""
import argparse
import collections
import statistics

from trace_chain import load_parts  # bench/ is the script's folder, first on sys.path


def critical_shares(parts, step):
    """Op instance name -> (share of the critical path, median run, max run), in the order they finish: each
    instance's last notify end minus the previous instance's (the first from the step's first set-up)."""
    tasks = collections.defaultdict(list)
    for (s, _), p in parts.items():
        if s == step and "run" in p and "notify" in p and "setup" in p:
            tasks[p["run"]["name"]].append(p)
    if not tasks:
        return {}
    end = {name: max(p["notify"]["ts"] + p["notify"]["dur"] for p in ps) for name, ps in tasks.items()}
    prev = min(p["setup"]["ts"] for ps in tasks.values() for p in ps)
    out = {}
    for name in sorted(tasks, key=lambda n: end[n]):
        runs = [p["run"]["dur"] for p in tasks[name]]
        out[name] = (end[name] - prev, statistics.median(runs), max(runs))
        prev = end[name]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, nargs=2, default=None, metavar=("A", "B"),
                    help="the steps to compare (default: the first and the middle one)")
    ap.add_argument("--top", type=int, default=12, help="op instances listed (largest differences)")
    args = ap.parse_args()
    events, parts = load_parts(args.trace)
    by_step = collections.defaultdict(list)
    for e in events:
        by_step[e["args"]["step"]].append(e)
    steps = sorted(by_step)
    print(f"{'step':>4} {'span us':>9} {'gap before us':>13}")
    prev_end = None
    for s in steps:
        start = min(e["ts"] for e in by_step[s])
        end = max(e["ts"] + e["dur"] for e in by_step[s])
        gap = f"{start - prev_end:13.2f}" if prev_end is not None else f"{'':13}"
        print(f"{s:4d} {end - start:9.1f} {gap}")
        prev_end = end
    if len(steps) < 2:
        return
    a, b = args.steps if args.steps else (steps[0], steps[len(steps) // 2])
    ca, cb = critical_shares(parts, a), critical_shares(parts, b)
    common = [n for n in ca if n in cb]
    total = sum(ca[n][0] - cb[n][0] for n in common)
    print(f"\nstep {a} against step {b}: critical path {total:+.1f} us over {len(common)} op instances")
    print(f"{'op instance':24} {'diff':>7} {'crit A':>8} {'crit B':>8} {'run p50 A':>9} {'run p50 B':>9} "
          f"{'run max A':>9} {'run max B':>9}")
    for n in sorted(common, key=lambda n: cb[n][0] - ca[n][0])[: args.top]:
        print(f"{n[:24]:24} {ca[n][0] - cb[n][0]:+7.2f} {ca[n][0]:8.2f} {cb[n][0]:8.2f} {ca[n][1]:9.2f} {cb[n][1]:9.2f} "
              f"{ca[n][2]:9.2f} {cb[n][2]:9.2f}")


if __name__ == "__main__":
    main()
