#!/usr/bin/env python3
"""Side-by-side decode latency of several weft builds (A/B), in one run on one GPU.

Each variant is LABEL=BUILD[:TUNE[:DEVLIB[:ENV]]]: a build folder (or a scripts/gpu-bundle.sh .tar.xz archive,
unpacked once) holding samples/weft_generate and libweft, optionally a $WEFT_TUNE value, a folder of device library
cubins to link instead of the embedded ones ($WEFT_DEVICE_LIBRARY_DIR, from scripts/devlib-build.sh) and
environment settings for that variant's runs (NAME=VALUE,NAME=VALUE: WEFT_FUSE_LINEAR_INPUTS=0, say). For every
model (a random checkpoint written by the first build's `weft checkpoint`), repetition and mode (step: one launch
per token; loop: every step in one launch), the variants run interleaved, so that a drift of the machine falls on
all of them alike; each run gives weft_generate's median per-token latency (CUDA events). Each variant keeps its
own kernel cache.

    python3 bench/ab_decode.py base=b0.tar.xz new=b1.tar.xz new-fullring=b1.tar.xz:8 new-dev=b1.tar.xz:0:devlib \
        new-unfused=b1.tar.xz:0::WEFT_FUSE_LINEAR_INPUTS=0 \
        [--models llama-3.2-1b,qwen3-0.6b] [--reps 3] [--steps 128] [--batch 1] [--trace [--trace-mode loop]] [--out ab.json]

Prints one row per (model, mode, variant): the medians of every repetition and their median; then, per model,
whether every run generated the same first 16 tokens (a variant that changes no arithmetic must; one that does may
part at a near tie of the random weights). A variant whose run fails is named with its error and dropped for that
model; the others go on, and the exit status is 1. --trace also writes a WEFT_TRACE of each variant (32 steps, step mode or --trace-mode)
and prints bench/trace_summary.py's tables for it (with --spread).
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def build_dir(path, work):
    """A build folder for `path`: itself, or an archive unpacked under `work` (once)."""
    if os.path.isdir(path):
        return os.path.abspath(path)
    out = os.path.join(work, re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(path)))
    if not os.path.isdir(out):
        os.makedirs(out)
        with tarfile.open(path) as t:
            t.extractall(out)
    return out


def run_generate(build, model, ids, args, mode, steps, tune, cache, devlib, extra_env, trace=None):
    env = dict(os.environ, LD_LIBRARY_PATH=build, WEFT_CACHE_DIR=cache, WEFT_TUNE=str(tune))
    env.pop("WEFT_DEVICE_LIBRARY_DIR", None)
    if devlib:
        env["WEFT_DEVICE_LIBRARY_DIR"] = devlib
    env.update(extra_env)
    if trace:
        env["WEFT_TRACE"] = trace
    cmd = [os.path.join(build, "samples", "weft_generate"), model, "--prompt-ids", ";".join([ids] * args.batch),
           "--steps", str(steps), "--mode", mode, "--max-batch", str(args.batch)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    m = re.search(r"median ([0-9.]+) ms", p.stdout)
    if p.returncode != 0 or not m:
        shown = cmd[:]
        shown[shown.index("--prompt-ids") + 1] = "<ids>"  # not the prompt's ids
        raise RuntimeError(f"{' '.join(shown)} failed ({p.returncode}): {(p.stderr or p.stdout)[-400:]}")
    tokens = re.search(r"^row 0:(.*)$", p.stdout, re.M)
    return float(m.group(1)), (tokens.group(1).split()[:16] if tokens else [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="LABEL=BUILD_DIR_OR_ARCHIVE[:WEFT_TUNE[:DEVLIB_DIR]]")
    ap.add_argument("--models", default="llama-3.2-1b,qwen3-0.6b", help="shapes `weft checkpoint` writes")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (0: with --trace, the traces only)")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--modes", default="step,loop")
    ap.add_argument("--trace", action="store_true", help="also a WEFT_TRACE summary of each variant")
    ap.add_argument("--trace-mode", default="step", help="the mode the traced runs use (step or loop)")
    ap.add_argument("--work", default=None, help="folder for checkpoints, unpacked builds and caches")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per weft_generate run")
    ap.add_argument("--out", default=None, help="JSON with every measurement")
    args = ap.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="weft_ab_")
    variants = []
    for v in args.variants:
        label, _, rest = v.partition("=")
        if not label or not rest:
            ap.error(f"variant '{v}' is not LABEL=BUILD[:TUNE[:DEVLIB[:ENV]]]")
        path, _, rest = rest.partition(":")
        tune, _, rest = rest.partition(":")
        devlib, _, env_text = rest.partition(":")
        extra_env = {}
        for setting in filter(None, env_text.split(",")):
            name, eq, value = setting.partition("=")
            if not name or not eq:
                ap.error(f"variant '{v}': environment setting '{setting}' is not NAME=VALUE")
            extra_env[name] = value
        variants.append(dict(label=label, build=build_dir(path, work), tune=int(tune, 0) if tune else 0,
                             devlib=os.path.abspath(devlib) if devlib else None, env=extra_env,
                             cache=os.path.join(work, "cache_" + label)))
    random.seed(1)
    ids = ",".join(str(random.randrange(1, 30000)) for _ in range(args.prompt_len))
    first = variants[0]["build"]
    results = []
    failed = {}  # (model, label) -> why: a variant that fails (a build refusing a shape, say) leaves the others running

    def attempt(model, folder, v, what, *run_args, **run_kw):
        """run_generate for variant v, or None where it fails (then v is dropped for this model)."""
        try:
            return run_generate(v["build"], folder, ids, args, *run_args, v["tune"], v["cache"],
                                v["devlib"], v["env"], **run_kw)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            failed[(model, v["label"])] = str(e)
            print(f"{model} {v['label']} {what}: FAILED, dropped for this model: {e}", flush=True)
            return None

    for model in args.models.split(","):
        folder = os.path.join(work, model)
        if not os.path.isdir(folder):
            subprocess.run([os.path.join(first, "weft"), "checkpoint", model, folder], check=True,
                           env=dict(os.environ, LD_LIBRARY_PATH=first), stdout=subprocess.DEVNULL)
        for rep in range(args.reps):
            for mode in args.modes.split(","):
                for v in variants:
                    if (model, v["label"]) in failed:
                        continue
                    run = attempt(model, folder, v, f"{mode} rep {rep}", mode, args.steps)
                    if run is None:
                        continue
                    ms, tokens = run
                    results.append(dict(model=model, mode=mode, variant=v["label"], tune=v["tune"], rep=rep, ms=ms,
                                        tokens=tokens))
                    print(f"{model} {mode} {v['label']} rep {rep}: {ms:.4f} ms", flush=True)
        if args.trace:
            for v in variants:
                if (model, v["label"]) in failed:
                    continue
                path = os.path.join(work, f"trace_{model}_{v['label']}.json")
                if attempt(model, folder, v, "trace", args.trace_mode, 32, trace=path) is None:
                    continue
                print(f"\n== trace: {model}, {v['label']} ==", flush=True)
                subprocess.run([sys.executable, os.path.join(HERE, "trace_summary.py"), path, "--spread"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(variants=variants, results=results,
                           failed=[dict(model=m, variant=l, error=e) for (m, l), e in failed.items()]), f, indent=1)
    print(f"\n{'model':14} {'mode':5} {'variant':16} {'median ms':>10}  per repetition")
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            for v in variants:
                ms = [r["ms"] for r in results if (r["model"], r["mode"], r["variant"]) == (model, mode, v["label"])]
                if not ms:  # --reps 0: traces only
                    continue
                print(f"{model:14} {mode:5} {v['label']:16} {statistics.median(ms):10.4f}  "
                      + " ".join(f"{x:.4f}" for x in ms))
    for line in token_agreement(results):
        print(line)
    for (model, label), why in failed.items():
        print(f"{model}: {label} failed: {why}")
    if failed:
        sys.exit(1)


def token_agreement(results):
    """Per model: whether every run's first tokens are the same, else which runs part from the most common ones."""
    lines = []
    for model in dict.fromkeys(r["model"] for r in results):
        runs = [r for r in results if r["model"] == model and r["tokens"]]
        if not runs:
            continue
        rows = [tuple(r["tokens"]) for r in runs]
        common = max(set(rows), key=rows.count)
        odd = [f"{r['variant']} {r['mode']} rep {r['rep']}" for r, row in zip(runs, rows) if row != common]
        lines.append(f"{model}: the first {len(common)} tokens of all {len(runs)} runs equal" if not odd else
                     f"{model}: {len(odd)} of {len(runs)} runs part from the most common first tokens: " + ", ".join(odd))
    return lines


if __name__ == "__main__":
    main()
