#!/usr/bin/env python3
"""How one op instance's finish carries into the next one's in a WEFT_TRACE file (Chrome trace JSON of one launch).

Op instances of a step are taken in the order they finish (last notify); each is compared with the one before it.
Per op kind (every number in the name folded, as trace_sm_speed.py does), averaged over its instances, in us:
  crit wake    the task that finished last: its run start after the previous instance's finish
  median wake  the same for the instance's median task
  late block   the same for the task on the block whose task finished the previous instance last
  crit run / median run, crit notify
  same block   how often the last task ran on the block that finished the previous instance last
  max-mean     the last task's finish over the mean finish of the instance's tasks: what equal finishing
               times would save at most on the critical path
Then every task (of an instance after a linear one, attention excluded), binned by when its set-up (descriptor and
prefetch) started relative to the previous instance's finish: the median wake and set-up end of each bin. A block
that finished the previous op late starts its set-up late, and its wake follows its set-up's end by about one
poll round trip: the finish of one op carries into the next through the blocks that ended it.
Last, per op kind, how long an instance's finish (last notify end) trails its last run end, and the notify of its
tasks by how early their run ended: a release waits for the block's stores behind the other tiles' weight streams
(round 37, docs/perf.md), so a tile that ends early but releases slowly can finish the op.

    python3 bench/trace_chain.py trace.json [--step N]
"""
import argparse
import collections
import json
import re
import statistics


def fold(name):
    return re.sub(r"\d+", "*", name)


def load_parts(path, step=None):
    """The trace's duration events (of one step, or all), and per (step, task) its "setup", "wait", "notify" and
    "run" event (the run is the event of any other category: the op's name)."""
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and (step is None or e["args"]["step"] == step)]
    parts = collections.defaultdict(dict)
    for e in events:
        cat = e["cat"] if e["cat"] in ("setup", "wait", "notify") else "run"
        parts[(e["args"]["step"], e["args"]["task"])][cat] = e
    return events, parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=None, help="only this step of a multi-step launch (default: all)")
    args = ap.parse_args()
    _, parts = load_parts(args.trace, args.step)
    instances = collections.defaultdict(list)  # (step, op instance name) -> its tasks
    for (step, _), p in parts.items():
        if "run" in p and "notify" in p and "setup" in p:
            instances[(step, p["run"]["name"])].append(p)

    def end(p):
        return p["notify"]["ts"] + p["notify"]["dur"]

    ordered = sorted(((max(end(p) for p in ps), key, ps) for key, ps in instances.items()), key=lambda r: (r[1][0], r[0]))
    rows = collections.defaultdict(list)
    bins = collections.defaultdict(list)
    trail = collections.defaultdict(list)  # op kind -> (finish - last run end, the finishing task's run end, its notify)
    notify_by_end = collections.defaultdict(lambda: collections.defaultdict(list))  # kind -> run end bin -> notifies
    for _, key, tasks in ordered:
        run_end = [p["run"]["ts"] + p["run"]["dur"] for p in tasks]
        last_run, last = max(run_end), max(tasks, key=end)
        kind = fold(key[1])
        trail[kind].append((end(last) - last_run, last["run"]["ts"] + last["run"]["dur"] - last_run, last["notify"]["dur"]))
        for p, r in zip(tasks, run_end):
            notify_by_end[kind][max(-6, round(r - last_run))].append(p["notify"]["dur"])
    for (prev_end, prev_key, prev_tasks), (_, key, tasks) in zip(ordered, ordered[1:]):
        if key[0] != prev_key[0]:  # a new step: the previous instance is another step's
            continue
        last_prev = max(prev_tasks, key=end)
        crit = max(tasks, key=end)
        ends = [end(p) for p in tasks]
        late = [p["run"]["ts"] - prev_end for p in tasks if p["run"]["tid"] == last_prev["run"]["tid"]]
        rows[fold(key[1])].append(dict(
            crit_wake=crit["run"]["ts"] - prev_end,
            median_wake=statistics.median(p["run"]["ts"] - prev_end for p in tasks),
            late_wake=late[0] if late else None,
            crit_run=crit["run"]["dur"], median_run=statistics.median(p["run"]["dur"] for p in tasks),
            crit_notify=crit["notify"]["dur"], same=crit["run"]["tid"] == last_prev["run"]["tid"],
            spread=max(ends) - statistics.mean(ends), tasks=len(tasks)))
        if "linear" in last_prev["run"]["args"]["op"] and "attention" not in crit["run"]["args"]["op"]:
            for p in tasks:
                start = p["setup"]["ts"] - prev_end
                setup_end = start + p["setup"]["dur"]
                b = max(-3.0, min(2.0, round(start * 2) / 2))
                bins[b].append((p["run"]["ts"] - prev_end, setup_end, p["setup"]["dur"]))

    def avg(xs):
        xs = [x for x in xs if x is not None]
        return statistics.mean(xs) if xs else float("nan")

    print(f"{'op kind':40} {'inst':>4} {'tasks':>5} {'crit wake':>9} {'median wake':>11} {'late block':>10} "
          f"{'crit run':>8} {'median run':>10} {'crit notify':>11} {'same block':>10} {'max-mean':>8}")
    total = 0.0
    for kind, v in sorted(rows.items(), key=lambda kv: -avg(r["crit_run"] for r in kv[1]) * len(kv[1])):
        total += sum(r["spread"] for r in v)
        print(f"{kind[:40]:40} {len(v):4d} {v[0]['tasks']:5d} {avg(r['crit_wake'] for r in v):9.2f} "
              f"{avg(r['median_wake'] for r in v):11.2f} {avg(r['late_wake'] for r in v):10.2f} "
              f"{avg(r['crit_run'] for r in v):8.2f} {avg(r['median_run'] for r in v):10.2f} "
              f"{avg(r['crit_notify'] for r in v):11.2f} {avg(float(r['same']) for r in v):10.2f} "
              f"{avg(r['spread'] for r in v):8.2f}")
    print(f"sum over instances of max-mean: {total:.1f} us")
    print(f"\n{'set-up start (us after the previous finish)':>44} {'tasks':>6} {'wake':>6} {'set-up end':>10} {'set-up':>7}")
    for b in sorted(bins):
        v = bins[b]
        label = f"<= {b:+.1f}" if b == -3.0 else f">= {b:+.1f}" if b == 2.0 else f"{b:+.1f}"
        print(f"{label:>44} {len(v):6d} {statistics.median(x[0] for x in v):6.2f} "
              f"{statistics.median(x[1] for x in v):10.2f} {statistics.median(x[2] for x in v):7.2f}")
    print(f"\n{'op kind':40} {'finish after last run end':>25} {'finisher run end':>16} {'its notify':>10}   "
          f"notify p50 by run end (us before the last; <= -6 pooled)")
    for kind, v in sorted(trail.items(), key=lambda kv: -statistics.median(x[0] for x in kv[1])):
        by_end = "  ".join(f"{b:+d}: {statistics.median(n):.2f}" for b, n in sorted(notify_by_end[kind].items()))
        print(f"{kind[:40]:40} {statistics.median(x[0] for x in v):25.2f} {statistics.median(x[1] for x in v):16.2f} "
              f"{statistics.median(x[2] for x in v):10.2f}   {by_end}")


if __name__ == "__main__":
    main()
