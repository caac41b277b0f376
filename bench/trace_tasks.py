#!/usr/bin/env python3
"""Per task of one op (tensor name matching a regex), its timeline in a WEFT_TRACE file: what its block ran before it
and when, when its set-up (descriptor and prefetch) started and ended, and when it ran and notified, each in us after
the previous op instance (in the order instances finish) was done. Shows whether a task's prefetch had time to land
and where its critical path went; the last line gives the medians over every matching instance.

    python3 bench/trace_tasks.py trace.json 'l\\d+\\.attn$' [--show 3]
"""
import argparse
import collections
import json
import re
import statistics

COLUMNS = ("prev end", "setup0", "setup1", "run0", "run1", "notified")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("pattern", help="regex on the op's output tensor name (layer numbers not folded)")
    ap.add_argument("--show", type=int, default=3, help="instances printed task by task (default 3)")
    args = ap.parse_args()
    pat = re.compile(args.pattern)
    parts = collections.defaultdict(dict)  # (step, task) -> {"run" | "setup" | "wait" | "notify": event}
    for e in json.load(open(args.trace))["traceEvents"]:
        if e.get("ph") == "X":
            cat = e["cat"] if e["cat"] in ("setup", "wait", "notify") else "run"
            parts[(e["args"]["step"], e["args"]["task"])][cat] = e
    tasks = [p for p in parts.values() if "run" in p]

    def end(p):
        e = p.get("notify") or p["run"]
        return e["ts"] + e["dur"]

    prev_on_block = {}
    by_block = collections.defaultdict(list)
    for p in tasks:
        by_block[p["run"]["tid"]].append(p)
    for q in by_block.values():
        q.sort(key=lambda p: p["run"]["ts"])
        for a, b in zip(q, q[1:]):
            prev_on_block[id(b)] = a
    inst = collections.defaultdict(list)
    for p in tasks:
        inst[(p["run"]["args"]["step"], p["run"]["name"])].append(p)
    done = {k: max(end(p) for p in ps) for k, ps in inst.items()}
    order = sorted(done, key=done.get)
    nan = float("nan")
    cols = collections.defaultdict(list)
    shown = 0
    for i, key in enumerate(order):
        if not pat.search(key[1]):
            continue
        t0 = done[order[i - 1]] if i else min(p["run"]["ts"] for p in tasks)
        ps = sorted(inst[key], key=lambda p: p["run"]["ts"])
        if shown < args.show:
            print(f"== {key[1]} (step {key[0]}; previous: {order[i - 1][1] if i else '-'}), {len(ps)} tasks, us")
            print(f"{'block':>5} {'previous task on the block':40} " + " ".join(f"{c:>8}" for c in COLUMNS))
        for p in ps:
            before, s, r = prev_on_block.get(id(p)), p.get("setup"), p["run"]
            row = [end(before) - t0 if before else nan, s["ts"] - t0 if s else nan,
                   s["ts"] + s["dur"] - t0 if s else nan, r["ts"] - t0, r["ts"] + r["dur"] - t0, end(p) - t0]
            for c, x in zip(COLUMNS, row):
                if x == x:
                    cols[c].append(x)
            if shown < args.show:
                name = before["run"]["name"][-40:] if before else "-"
                print(f"{r['tid']:5d} {name:40} " + " ".join(f"{x:8.2f}" for x in row))
        shown += 1
    if not shown:
        raise SystemExit(f"no op matches {args.pattern!r}")
    print(f"medians over {shown} instances: " +
          ", ".join(f"{c} {statistics.median(cols[c]):.2f}" for c in COLUMNS if cols[c]))


if __name__ == "__main__":
    main()
