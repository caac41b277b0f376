#!/usr/bin/env python3
"""Summarizes a WEFT_TRACE file (Chrome trace JSON of one megakernel launch): where the time of a step goes.

Per op kind (tensor names with the layer number folded, e.g. model.layers.*.mlp.down_proj), over all blocks:
tasks, busy time (sum of task spans), wait time, the mean set-up (descriptor + prefetch before the wait) and
notify time per task, the op's span (first start to last end of one instance, averaged over instances) and its
share of the critical path: instances of a step in the order they finish (last notify), each charged the time
from the previous one's finish to its own ("crit us/inst"; they add up to the step), of which "lag" is the part
before its first task started to run (event propagation and set-up left on the path).
Then the launch's span, how busy the blocks were, and the gaps between ops.

    python3 bench/trace_summary.py trace.json [--step N] [--spread]

--spread adds, per op kind, how each instance's share of the critical path splits: for the task that finished
last (notified last), the time from the previous instance's finish to its run start (wake: event propagation,
poll, set-up left after it), its run time and its notify; and over all tasks of the instance, the median and
slowest wake and run time: a last task that woke late points at the wait, one that ran long at its tile.
"""
import argparse
import collections
import json
import re
import statistics


def mean0(xs):
    return statistics.mean(xs) if xs else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=None, help="only this step of a multi-step launch")
    ap.add_argument("--spread", action="store_true", help="also where each op's critical path goes (see above)")
    args = ap.parse_args()
    events = [e for e in json.load(open(args.trace))["traceEvents"] if e.get("ph") == "X"]
    if args.step is not None:
        events = [e for e in events if e["args"]["step"] == args.step]
    around = ("wait", "setup", "notify")
    tasks = [e for e in events if e["cat"] not in around]
    waits = [e for e in events if e["cat"] == "wait"]
    if not tasks:
        raise SystemExit("no task records in " + args.trace)
    blocks = len({e["tid"] for e in tasks})
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    span = t1 - t0

    def kind(name):  # the layer number folded: model.layers.3.mlp -> model.layers.*.mlp, l3.qkv -> l*.qkv
        return re.sub(r"(^|\.)l?\d+\.", lambda m: m.group(0).rstrip(".").rstrip("0123456789") + "*.", name)

    mhz = collections.defaultdict(list)
    busy = collections.defaultdict(float)
    count = collections.Counter()
    op_of = {}
    inst = collections.defaultdict(lambda: [float("inf"), 0.0])  # exact name -> [first start, last end]
    for e in tasks:
        k = kind(e["name"])
        busy[k] += e["dur"]
        count[k] += 1
        op_of[k] = e["cat"].replace("weft_dev_", "")
        if e["args"].get("mhz"):
            mhz[k].append(e["args"]["mhz"])
        iv = inst[(e["args"]["step"], e["name"])]
        iv[0] = min(iv[0], e["ts"])
        iv[1] = max(iv[1], e["ts"] + e["dur"])
    task_kind = {(e["args"]["step"], e["args"]["task"]): kind(e["name"]) for e in tasks}
    task_inst = {(e["args"]["step"], e["args"]["task"]): (e["args"]["step"], e["name"]) for e in tasks}
    done = {key: iv[1] for key, iv in inst.items()}  # an instance is done when its last task has notified
    notify_end = {}  # (step, task) -> end of its notify
    for e in events:
        if e["cat"] == "notify":
            task = (e["args"]["step"], e["args"]["task"])
            notify_end[task] = e["ts"] + e["dur"]
            key = task_inst.get(task)
            if key is not None:
                done[key] = max(done[key], notify_end[task])
    crit = collections.defaultdict(list)
    lag = collections.defaultdict(list)
    spread = collections.defaultdict(list)  # op kind -> per instance (last's wake, run, notify; median / max wake, run)
    runs = collections.defaultdict(list)  # instance -> [(run start, run time, notify end)]
    for e in tasks:
        key = (e["args"]["step"], e["args"]["task"])
        runs[task_inst[key]].append((e["ts"], e["dur"], notify_end.get(key, e["ts"] + e["dur"])))
    by_step = collections.defaultdict(list)
    for key in inst:
        by_step[key[0]].append(key)
    for keys in by_step.values():
        keys.sort(key=lambda k: done[k])
        for prev, cur in zip(keys, keys[1:]):
            crit[kind(cur[1])].append(done[cur] - done[prev])
            lag[kind(cur[1])].append(max(0.0, inst[cur][0] - done[prev]))
            r = runs[cur]
            last = max(r, key=lambda t: t[2])
            wakes = [t[0] - done[prev] for t in r]
            durs = [t[1] for t in r]
            spread[kind(cur[1])].append((last[0] - done[prev], last[1], last[2] - last[0] - last[1],
                                         statistics.median(wakes), max(wakes), statistics.median(durs), max(durs)))
    by_kind = {c: collections.defaultdict(float) for c in around}  # category -> op kind -> total us
    for e in events:
        if e["cat"] in around:
            by_kind[e["cat"]][task_kind.get((e["args"]["step"], e["args"]["task"]), "?")] += e["dur"]
    wait_by_kind = by_kind["wait"]
    spans = collections.defaultdict(list)
    for (step, name), (a, b) in inst.items():
        spans[kind(name)].append(b - a)
    order = sorted(busy, key=lambda k: -busy[k])
    print(f"launch span {span:.1f} us over {blocks} blocks; busy {sum(busy.values()) / (blocks * span) * 100:.1f}% "
          f"of block time, waiting {sum(wait_by_kind.values()) / (blocks * span) * 100:.1f}%")
    print(f"{'op kind':56} {'op':18} {'tasks':>6} {'busy us':>9} {'wait us':>9} {'setup/task':>10} "
          f"{'notify/task':>11} {'span us/inst':>12} {'crit us/inst':>12} {'lag':>6} {'n':>4} {'MHz':>6}")
    for k in order:
        print(f"{k[:56]:56} {op_of[k]:18} {count[k]:6d} {busy[k]:9.1f} {wait_by_kind[k]:9.1f} "
              f"{by_kind['setup'][k] / count[k]:10.2f} {by_kind['notify'][k] / count[k]:11.2f} "
              f"{statistics.mean(spans[k]):12.2f} {mean0(crit[k]):12.2f} {mean0(lag[k]):6.2f} {len(spans[k]):4d} {statistics.median(mhz[k]) if mhz[k] else 0:6.0f}")
    if args.spread:
        print(f"\n{'op kind (us per instance)':56} {'crit':>7} {'last: wake':>11} {'run':>6} {'notify':>7} "
              f"{'wake p50':>9} {'wake max':>9} {'run p50':>8} {'run max':>8}")
        for k in order:
            if not spread[k]:
                continue
            cols = [statistics.mean(c) for c in zip(*spread[k])]
            print(f"{k[:56]:56} {mean0(crit[k]):7.2f} {cols[0]:11.2f} {cols[1]:6.2f} {cols[2]:7.2f} "
                  f"{cols[3]:9.2f} {cols[4]:9.2f} {cols[5]:8.2f} {cols[6]:8.2f}")
    # Sum over op instances of their spans vs the launch: > 1 means ops overlap, < 1 means gaps between them.
    total_inst = sum(b - a for a, b in inst.values())
    print(f"sum of op-instance spans {total_inst:.1f} us = {total_inst / span:.2f} x the launch span")


if __name__ == "__main__":
    main()
