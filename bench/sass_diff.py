#!/usr/bin/env python3
"""Compares one function's SASS across device-library cubins: what changed in the code, and what only in its registers.

The batch-1 task loop (`weft_dev_run_queues`, every hot op inlined) is one ~3,400-instruction function whose
register allocation ptxas redoes for any change anywhere in it; a change that adds nothing to what runs can still
move a decode step by ~1% that way (docs/perf.md round 38). Per cubin this prints the function's instruction
count, its local-memory (spill) loads and stores, its cp.async copies and barriers; then, against the first
cubin, how many instructions differ with only addresses and branch targets masked (code or allocation changed)
and with registers and predicates masked too (the code itself changed). Needs no GPU:

    python3 bench/sass_diff.py BASE.cubin OTHER.cubin [...] [--function NAME]

nvdisasm comes from $NVDISASM, PATH, or the CUDA toolkit; a machine without it can take the one in PyPI's
`nvidia-cuda-nvdisasm` wheel (`pip download --no-deps nvidia-cuda-nvdisasm`, unzip, nvidia/cu13/bin/nvdisasm).
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")
SECTION = re.compile(r"^\s*\.section\s+([^,\s]+)|^\s*(\.text\.[^:\s]+):")  # a section, or its label


def nvdisasm():
    for path in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit("sass_diff.py: no nvdisasm ($NVDISASM, PATH, /usr/local/cuda/bin); see this script's docstring")


def function_sass(tool, cubin, function):
    """The function's instructions, in order, as nvdisasm prints them (predicate, opcode, operands)."""
    p = subprocess.run([tool, "-c", cubin], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"sass_diff.py: nvdisasm failed on {cubin}: {p.stderr.strip()}")
    out, inside = [], False
    for line in p.stdout.splitlines():
        m = SECTION.match(line)
        if m:
            inside = (m.group(1) or m.group(2)) == ".text." + function
            continue
        if inside:
            i = INSTRUCTION.search(line)
            if i:
                out.append(i.group(1))
    if not out:
        sys.exit(f"sass_diff.py: no function {function} in {cubin}")
    return out


def masked(lines, registers):
    """Addresses and branch targets masked; with `registers`, registers and predicates too (the code's shape)."""
    res = []
    for s in lines:
        s = re.sub(r"0x[0-9a-f]+", "X", s)
        s = re.sub(r"`\([^)]*\)", "L", s)
        if registers:
            s = re.sub(r"\bU?R(\d+|Z)\b", "R", s)
            s = re.sub(r"\bU?P(\d+|T)\b", "P", s)
        res.append(s)
    return res


def differing(a, b):
    return sum(1 for d in difflib.unified_diff(a, b, lineterm="", n=0)
               if d[:1] in "+-" and d[:3] not in ("+++", "---"))


def counts(lines):
    op = [re.sub(r"^@!?U?P\w+\s+", "", s).split(" ")[0] for s in lines]
    return {
        "instructions": len(lines),
        "LDL": sum(o.startswith("LDL") for o in op),
        "STL": sum(o.startswith("STL") for o in op),
        "LDGSTS": sum(o.startswith("LDGSTS") for o in op),
        "BAR": sum(o.startswith("BAR") for o in op),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cubins", nargs="+", help="the first is the base")
    ap.add_argument("--function", default="weft_dev_run_queues")
    args = ap.parse_args()
    tool = nvdisasm()
    base = function_sass(tool, args.cubins[0], args.function)
    base_alloc, base_code = masked(base, False), masked(base, True)
    print(f"{args.function}\n\n| cubin | instructions | LDL | STL | LDGSTS | BAR | differing from the first | "
          "with registers masked |\n|---|---|---|---|---|---|---|---|")
    for path in args.cubins:
        sass = base if path == args.cubins[0] else function_sass(tool, path, args.function)
        c = counts(sass)
        d_alloc = differing(base_alloc, masked(sass, False))
        d_code = differing(base_code, masked(sass, True))
        print(f"| {path} | {c['instructions']} | {c['LDL']} | {c['STL']} | {c['LDGSTS']} | {c['BAR']} | {d_alloc} | "
              f"{d_code} |")


if __name__ == "__main__":
    main()
