#!/usr/bin/env python3
"""Decode benchmark of the decode-performance issue: weft vs HF eager vs torch.compile vs the bandwidth floor.

For each model shape and batch, in one run on one device:
  weft step    weft_generate --mode step: one megakernel launch per token; its median CUDA-event step time
  weft resid.  weft_generate --mode resident: all steps in one launch that hands each token to the host and
               waits for its answer (a streaming caller's view); launch time / steps
  weft loop    weft_generate --mode loop: all steps in one launch; launch time / steps
  HF eager     transformers forward with a DynamicCache, a manual greedy loop, CUDA events around each step
  compile      torch.compile(model.forward, mode="reduce-overhead", fullgraph=True) with a StaticCache
  floor        (weight bytes + KV bytes read per token) / device copy bandwidth measured in this run

Models are random bf16 (no network): built on the device from a config, saved with save_pretrained into a
temporary folder that weft_generate loads. All paths time the same work: prefill prompt[:-1], then `steps`
decode steps, the first consuming the prompt's last token (what weft_generate does), so step j of every path
runs at position prompt_len - 1 + j and the generated tokens line up for the side check.

    python3 bench/decode.py [--models llama-3.2-1b,qwen3-0.6b,qwen3-8b] [--batches 1] [--out decode_bench.json]
    python3 bench/decode.py --tiny --device cpu --skip-torch-compile   # CPU smoke test (weft reference backend)
"""
import argparse
import datetime
import gc
import inspect
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch
import transformers

# Configs, the tiny override and the config.json fix-up weft's loader needs come from the HF comparison script,
# so that both scripts build the same models.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import hf_compare  # noqa: E402

MODELS = {
    "llama-3.2-1b": hf_compare.MODELS["llama-3.2-1b"],
    "qwen3-0.6b": hf_compare.MODELS["qwen3-0.6b"],
    "qwen3-8b": dict(hf_compare.MODELS["qwen3-8b-2l"], num_hidden_layers=36),
    "qwen3-8b-2l": hf_compare.MODELS["qwen3-8b-2l"],
}
# hf_compare.make_config builds a model's config from its table; the full Qwen3-8B joins that table.
hf_compare.MODELS.setdefault("qwen3-8b", MODELS["qwen3-8b"])
DEFAULT_MODELS = "llama-3.2-1b,qwen3-0.6b,qwen3-8b"
INIT_STD = 0.02  # small random normal weights (HF's initializer_range)
MATCH_STEPS = 8  # tokens compared between weft and HF eager (informational: random weights give near-ties)


def log(*a):
    print(*a, flush=True)


def short_error(e):
    # The first line: dynamo's and weft's messages lead with the cause and end with hints.
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:500]


# ---------------------------------------------------------------------------------------------- model building

@torch.no_grad()
def build_model(name, tiny, device, seed):
    cfg, scaling, theta = hf_compare.make_config(name, tiny)
    dtype_kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    # Constructed directly on the device: an 8B model initialized on the CPU takes minutes.
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, **{dtype_kw: torch.bfloat16})
    model.eval()
    if any(p.device != device for p in model.parameters()):  # a transformers version that ignored the context
        model.to(device)
    # Our own init, independent of the transformers version: small normal weights, norms near 1 (not exactly 1,
    # so that a kernel ignoring them would change the tokens of the side check).
    g = torch.Generator(device=device).manual_seed(seed)
    for n, p in model.named_parameters():  # tied parameters are listed once
        if n.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g, device=device, dtype=torch.float32))
        else:
            p.normal_(0.0, INIT_STD, generator=g)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model, scaling, theta


def save_model(model, path, scaling, theta):
    kw = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kw["safe_serialization"] = True  # 4.x; 5.x always writes safetensors
    model.save_pretrained(path, **kw)
    return hf_compare.fix_saved_config(path, theta, scaling)


def pick_work_dir(requested, need_bytes):
    """The checkpoint goes to tmpfs when it fits (saving and weft's two loads of 16 GB are then fast)."""
    if requested:
        os.makedirs(requested, exist_ok=True)
        return requested
    for d in ("/dev/shm", tempfile.gettempdir()):
        try:
            if os.path.isdir(d) and os.access(d, os.W_OK) and shutil.disk_usage(d).free > 1.25 * need_bytes + (1 << 30):
                return d
        except OSError:
            pass
    return tempfile.gettempdir()


def free_torch_memory(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- timing

class StepClock:
    """Marks on the device's timeline: CUDA events on a GPU (as weft_generate reports), perf_counter on the CPU.
    Events are made up front so that the timed loop does no more host work than it has to."""

    def __init__(self, device, marks):
        self.cuda = device.type == "cuda"
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(marks)] if self.cuda else []
        self.marks = []

    def mark(self):
        if self.cuda:
            e = self.events[len(self.marks)]
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def intervals_ms(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


def summarize(ms):
    s = sorted(ms)
    pick = lambda q: s[int(q * (len(s) - 1) + 0.5)]
    return {"per_token_ms_median": statistics.median(s), "p10_ms": pick(0.1), "p90_ms": pick(0.9),
            "mean_ms": statistics.fmean(s), "steps": len(s)}


def copy_bandwidth(device, nbytes, reps=20, warmup=3):
    """Bytes/s of a device-to-device copy: 2 * bytes (read + write) over the median copy time."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    src.fill_(1)  # touched, so that the first timed copy does not pay for page faults
    dst = torch.empty_like(src)
    for _ in range(warmup):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        c = StepClock(device, 2)
        c.mark()
        dst.copy_(src)
        c.mark()
        times.append(c.intervals_ms()[0])
    med = statistics.median(times)
    del src, dst
    free_torch_memory(device)
    return {"bytes": nbytes, "reps": reps, "median_ms": med, "min_ms": min(times),
            "bandwidth_bytes_per_s": 2 * nbytes / (med / 1e3)}


def floor_model(model, batch, prompt_len, steps):
    """Bytes one decode step must read: every weight once (only `batch` rows of an untied embedding), plus the
    KV cache at the mean context length."""
    cfg = model.config
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = head is emb or (emb.device.type != "meta" and head.data_ptr() == emb.data_ptr())
    params = sum(p.numel() * p.element_size() for p in model.parameters())  # tied weights counted once
    emb_bytes = emb.numel() * emb.element_size()
    rows_bytes = batch * emb.shape[1] * emb.element_size()
    weight_bytes = params if tied else params - emb_bytes + rows_bytes
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    mean_ctx = prompt_len + steps / 2
    kv_bytes = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * 2 * mean_ctx * batch
    return {"weight_bytes": int(weight_bytes), "kv_bytes": int(kv_bytes), "mean_context": mean_ctx,
            "tied_embeddings": tied, "param_bytes": int(params), "embedding_bytes": int(emb_bytes),
            # Every parameter whole, an untied embedding included (how the 8B floor of 3.83 ms comes out).
            "weight_bytes_whole_embedding": int(params)}


# ---------------------------------------------------------------------------------------------- HF paths

def forward_params(model):
    return inspect.signature(model.forward).parameters


def prefill_kwargs(model):
    # Only the last position's logits: the full [B, P, vocab] tensor is large for a 152k vocab.
    return {"logits_to_keep": 1} if "logits_to_keep" in forward_params(model) else {}


@torch.no_grad()
def hf_eager(model, prompts, steps, device, warmup_steps):
    """Greedy decode with a DynamicCache; CUDA events between consecutive steps (as weft_generate's step mode)."""
    prompts = prompts.to(device)
    pkw = prefill_kwargs(model)

    def run(n):
        out = model(input_ids=prompts[:, :-1], use_cache=True, **pkw)
        cache = out.past_key_values
        del out
        tok = prompts[:, -1:]
        toks = []
        clock = StepClock(device, n + 1)
        clock.mark()
        for _ in range(n):
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            del out
            toks.append(tok)
            clock.mark()
        ms = clock.intervals_ms()
        return torch.cat(toks, dim=1).cpu(), ms

    run(warmup_steps)
    tokens, ms = run(steps)
    return dict(summarize(ms), tokens=tokens.tolist(), step_ms=ms,
                attn_implementation=getattr(model.config, "_attn_implementation", None))


def make_static_cache(model, batch, max_len, device):
    """StaticCache across versions: 5.x sizes it lazily from the first update; 4.x wants batch, device, dtype."""
    from transformers import StaticCache
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": model.config, "max_cache_len": max_len}
    for name, value in (("max_batch_size", batch), ("batch_size", batch), ("device", device),
                        ("dtype", torch.bfloat16)):
        if name in params:
            kw[name] = value
    return StaticCache(**kw)


@torch.no_grad()
def hf_compiled(model, prompts, steps, device, max_cache_len, warmup_steps):
    """HF's static-cache recipe: eager prefill into a StaticCache, decode through
    torch.compile(model.forward, mode="reduce-overhead", fullgraph=True) (CUDA graphs on a GPU)."""
    prompts = prompts.to(device)
    batch, plen = prompts.shape
    # Older versions position the StaticCache update by cache_position; newer ones (no such argument) keep
    # their own position counter as a device tensor.
    takes_cpos = "cache_position" in forward_params(model)
    pkw = prefill_kwargs(model)
    cache = make_static_cache(model, batch, max_cache_len, device)
    compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)

    def run(n):
        cache.reset()  # in place: the CUDA graphs keep pointing at the same cache tensors
        kw = {"cache_position": torch.arange(plen - 1, device=device)} if takes_cpos else {}
        out = model(input_ids=prompts[:, :-1], past_key_values=cache, use_cache=True, **kw, **pkw)
        del out
        cpos = torch.tensor([plen - 1], device=device)
        tok = prompts[:, -1:].clone()
        toks = []
        clock = StepClock(device, n + 1)
        clock.mark()
        for _ in range(n):
            kw = {"cache_position": cpos} if takes_cpos else {}
            mark_step()
            logits = compiled(input_ids=tok, past_key_values=cache, use_cache=True, **kw).logits
            tok = logits[:, -1].argmax(-1, keepdim=True)  # read before the next replay overwrites the graph's output
            del logits
            toks.append(tok)
            cpos += 1
            clock.mark()
        ms = clock.intervals_ms()
        return torch.cat(toks, dim=1).cpu(), ms

    def graphs():
        try:
            return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
        except Exception:
            return None

    def cudagraph_skips():
        try:
            return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
        except Exception:
            return None

    s0 = cudagraph_skips()
    t0 = time.perf_counter()
    run(warmup_steps)  # compiles, then CUDA-graph warm-up and capture
    if device.type == "cuda":
        torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    g0 = graphs()
    tokens, ms = run(steps)
    g1 = graphs()
    res = dict(summarize(ms), tokens=tokens.tolist(), step_ms=ms, warmup_and_compile_s=warm_s,
               passes_cache_position=takes_cpos)
    if g0 is not None and g1 is not None:
        res["graphs_compiled_while_timing"] = g1 - g0  # should be 0: a recompile would be timed
    s1 = cudagraph_skips()
    if device.type == "cuda" and s0 is not None and s1 is not None:
        res["cudagraph_skips"] = s1 - s0  # should be 0: without CUDA graphs this is not reduce-overhead
    return res


def reset_compiler():
    try:
        torch._dynamo.reset()
    except Exception:
        pass
    try:
        from torch._inductor import cudagraph_trees
        cudagraph_trees.reset_cudagraph_trees()
    except Exception:
        pass


# ---------------------------------------------------------------------------------------------- weft

def run_weft(args, model_dir, prompts, steps, mode, tmp):
    rows = ";".join(",".join(str(int(t)) for t in r) for r in prompts.tolist())
    batch, plen = prompts.shape
    json_out = os.path.join(tmp, f"weft_{mode}_b{batch}.json")
    cmd = [args.weft_generate, model_dir, "--prompt-ids", rows, "--steps", str(steps), "--mode", mode,
           "--backend", args.weft_backend, "--json", json_out, "--max-batch", str(batch),
           "--max-seq", str(plen + steps + 8)]
    env = dict(os.environ)
    # A build folder copied to another machine: its RUNPATH names the folder it was built in.
    libdir = os.path.dirname(os.path.dirname(args.weft_generate))
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"weft_generate --mode {mode} exited {r.returncode}: "
                           f"{(r.stderr.strip() or r.stdout.strip())[-2000:]}")
    with open(json_out) as f:
        res = json.load(f)
    if res.get("steps") != steps or len(res.get("step_ms", [])) != steps:
        raise RuntimeError(f"weft_generate --mode {mode} reported {res.get('steps')} steps, expected {steps}")
    m = re.search(r"([0-9.]+) MB of weights", r.stdout)
    out = {k: res.get(k) for k in ("backend", "device", "mode", "compile_ms", "cache_hit", "prefill_ms",
                                   "decode_ms", "per_token_ms_median", "tokens", "step_ms")}
    out.update(summarize(res["step_ms"]))
    out["per_token_ms_median"] = res["per_token_ms_median"]  # weft's own number is the one reported
    out["weight_mb_reported"] = float(m.group(1)) if m else None
    out["process_wall_s"] = wall
    return out


def token_match(a, b, n):
    """Positions (row, step < n) where both token lists agree, and the first disagreeing step of each row."""
    same, total, first = 0, 0, []
    for ra, rb in zip(a, b):
        k = min(n, len(ra), len(rb))
        eq = [ra[j] == rb[j] for j in range(k)]
        same += sum(eq)
        total += k
        first.append(next((j for j, e in enumerate(eq) if not e), None))
    return {"matched": same, "compared": total, "first_mismatch_per_row": first, "steps": n}


# ---------------------------------------------------------------------------------------------- report

def fmt_ms(v):
    return "-" if v is None else f"{v:.3f}"


def derive(r):
    """Floor fraction and speedups, from whatever phases produced numbers."""
    g = lambda k: (r.get(k) or {}).get("per_token_ms_median")
    step, loop, eager, comp = g("weft_step"), g("weft_loop"), g("hf_eager"), g("torch_compile")
    resident = g("weft_resident")
    floor = r.get("floor_ms")
    best = min([v for v in (step, resident, loop) if v], default=None)
    r["weft_best_ms"] = best
    r["floor_fraction_step"] = floor / step if floor and step else None
    r["floor_fraction_resident"] = floor / resident if floor and resident else None
    r["floor_fraction_loop"] = floor / loop if floor and loop else None
    r["floor_fraction_best"] = floor / best if floor and best else None
    r["speedup_vs_compile"] = comp / best if comp and best else None
    r["speedup_vs_eager"] = eager / best if eager and best else None


def print_table(results):
    hdr = ["model", "B", "weft step ms", "weft resident ms", "weft loop ms", "HF eager ms", "compile ms", "floor ms",
           "% floor step", "% floor resident", "% floor loop", "x compile", f"tokens={MATCH_STEPS}"]
    rows = []
    for r in results:
        g = lambda k: (r.get(k) or {}).get("per_token_ms_median")
        pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"
        m = r.get("token_match")
        rows.append([r["model"], str(r["batch"]), fmt_ms(g("weft_step")), fmt_ms(g("weft_resident")),
                     fmt_ms(g("weft_loop")), fmt_ms(g("hf_eager")), fmt_ms(g("torch_compile")), fmt_ms(r.get("floor_ms")),
                     pct(r.get("floor_fraction_step")), pct(r.get("floor_fraction_resident")),
                     pct(r.get("floor_fraction_loop")),
                     "-" if r.get("speedup_vs_compile") is None else f"{r['speedup_vs_compile']:.2f}x",
                     f"{m['matched']}/{m['compared']}" if m else "-"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    for row in [hdr] + rows:
        log("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    log("'-': skipped or failed (see errors above / in the JSON). x compile = torch.compile ms / best weft ms; "
        f"tokens={MATCH_STEPS}: weft step-mode tokens equal to HF eager's in the first {MATCH_STEPS} steps "
        "(informational: random weights give near-ties).")
    for r in results:
        for phase, err in r.get("errors", {}).items():
            log(f"  {r['model']} B={r['batch']} {phase}: {err}")
        tc = r.get("torch_compile") or {}
        if tc.get("graphs_compiled_while_timing") or tc.get("cudagraph_skips"):
            log(f"  {r['model']} B={r['batch']} torch.compile: {tc.get('graphs_compiled_while_timing')} graphs "
                f"compiled while timing, {tc.get('cudagraph_skips')} CUDA-graph skips: its number is suspect")
        whole = r.get("floor_ms_whole_embedding")
        if whole and r.get("floor_ms") and whole > r["floor_ms"] * 1.001:
            log(f"  {r['model']} B={r['batch']}: floor {r['floor_ms']:.3f} ms reads {r['batch']} row(s) of the "
                f"untied embedding; {whole:.3f} ms counting it whole")


def device_info(device):
    info = {"torch_device": str(device), "host": platform.node(), "cpu": platform.processor() or platform.machine()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(name=torch.cuda.get_device_name(device), sm_count=p.multi_processor_count,
                    memory_bytes=p.total_memory, cuda=torch.version.cuda)
    else:
        info["name"] = f"CPU ({info['cpu']}, {os.cpu_count()} threads)"
    return info


# ---------------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, of: {', '.join(MODELS)}")
    ap.add_argument("--batches", default="1", help="comma-separated batch sizes, each run for every model")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=128, help="generated tokens (timed decode steps)")
    ap.add_argument("--warmup-steps", type=int, default=8, help="untimed decode steps before HF's timed runs")
    ap.add_argument("--weft-generate", default="build/samples/weft_generate")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    ap.add_argument("--tiny", action="store_true", help="2-layer hidden-64 versions of every model (smoke test)")
    ap.add_argument("--skip-weft", action="store_true")
    ap.add_argument("--skip-eager", action="store_true")
    ap.add_argument("--skip-torch-compile", action="store_true")
    ap.add_argument("--copy-mib", type=int, default=None, help="copy-bandwidth buffer (default 1024; 64 on CPU)")
    ap.add_argument("--work", default=None, help="folder for the saved checkpoints (default /dev/shm if it fits)")
    ap.add_argument("--keep", action="store_true", help="keep the saved checkpoints")
    ap.add_argument("--out", default="decode_bench.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=1200, help="seconds per weft_generate run")
    args = ap.parse_args()

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no GPU")
    if device.type == "cuda":
        if device.index is None:  # an explicit index, so that parameters compare equal to it
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    # On the CPU only the reference interpreter can run weft; on a GPU insist on the GPU backend, so that a
    # silent fallback cannot put CPU numbers in the table.
    args.weft_backend = "gpu" if device.type == "cuda" else "reference"
    args.weft_generate = os.path.abspath(args.weft_generate)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; known: {', '.join(MODELS)}")
    if args.prompt_len < 2 or args.steps < 1 or not batches or min(batches) < 1:
        ap.error("need --prompt-len >= 2 (the prefill fills the cache), --steps >= 1, batches >= 1")
    exe = args.weft_generate
    if not args.skip_weft and not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        ap.error(f"{args.weft_generate} is not an executable (build the weft_generate sample, or --skip-weft)")
    max_cache_len = args.prompt_len + args.steps + 8

    dev = device_info(device)
    log(f"device {dev['name']}; torch {torch.__version__}, transformers {transformers.__version__}; "
        f"weft backend {args.weft_backend}")
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "device": dev, "torch": torch.__version__, "transformers": transformers.__version__,
               "python": platform.python_version(), "tiny": args.tiny, "prompt_len": args.prompt_len,
               "steps": args.steps, "warmup_steps": args.warmup_steps, "max_cache_len": max_cache_len,
               "weft_generate": args.weft_generate, "weft_backend": args.weft_backend,
               "command": " ".join(sys.argv), "results": []}

    def write():
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=2)

    copy_mib = args.copy_mib or (1024 if device.type == "cuda" else 64)
    try:
        bw = copy_bandwidth(device, copy_mib << 20)
        summary["copy"] = bw
        log(f"copy bandwidth: {bw['bandwidth_bytes_per_s'] / 1e12:.3f} TB/s "
            f"({copy_mib} MiB copy, median {bw['median_ms']:.3f} ms of {bw['reps']})")
    except Exception as e:
        bw = None
        summary["copy_error"] = short_error(e)
        log(f"copy bandwidth: FAILED {short_error(e)} (no floor this run)")
    bandwidth = bw["bandwidth_bytes_per_s"] if bw else None
    write()

    results = summary["results"]
    for mi, name in enumerate(models):
        label = name + ("-tiny" if args.tiny else "")
        recs = [{"model": label, "batch": b, "errors": {}} for b in batches]
        results.extend(recs)
        t0 = time.perf_counter()
        model = None
        model_dir = None
        try:
            log(f"[{label}] building a random bf16 model on {device}")
            model, scaling, theta = build_model(name, args.tiny, device, args.seed + mi)
            nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
            work = pick_work_dir(args.work, nbytes)
            model_dir = tempfile.mkdtemp(prefix=f"decode_{label}_", dir=work)
            log(f"[{label}] {nbytes / 1e9:.2f} GB of weights; saving to {model_dir} "
                f"(built in {time.perf_counter() - t0:.1f} s)")
            t1 = time.perf_counter()
            cfg = save_model(model, model_dir, scaling, theta)
            log(f"[{label}] saved in {time.perf_counter() - t1:.1f} s")
        except Exception as e:
            log(f"[{label}] model build/save FAILED: {short_error(e)}")
            traceback.print_exc()
            for r in recs:
                r["errors"]["build"] = short_error(e)
            model = None
            if model_dir:
                shutil.rmtree(model_dir, ignore_errors=True)
            free_torch_memory(device)
            write()
            continue

        prompts = {}
        for r in recs:
            b = r["batch"]
            g = torch.Generator().manual_seed(args.seed * 1000 + mi * 100 + b)
            prompts[b] = torch.randint(0, cfg["vocab_size"], (b, args.prompt_len), generator=g)
            r["prompt_ids"] = prompts[b].tolist()
            try:
                fl = floor_model(model, b, args.prompt_len, args.steps)
                r["floor_bytes"] = fl
                if bandwidth:
                    r["floor_ms"] = (fl["weight_bytes"] + fl["kv_bytes"]) / bandwidth * 1e3
                    whole = fl["weight_bytes_whole_embedding"] + fl["kv_bytes"]
                    r["floor_ms_whole_embedding"] = whole / bandwidth * 1e3
            except Exception as e:
                r["errors"]["floor"] = short_error(e)
                log(f"[{label}] floor B={b} FAILED: {short_error(e)}")

        # Both HF paths share the torch model; it is freed before weft loads its own copy.
        for r in recs:
            if args.skip_eager:
                break
            b = r["batch"]
            try:
                log(f"[{label}] HF eager B={b}")
                r["hf_eager"] = hf_eager(model, prompts[b], args.steps, device, args.warmup_steps)
                log(f"[{label}] HF eager B={b}: {r['hf_eager']['per_token_ms_median']:.3f} ms/token")
            except Exception as e:
                r["errors"]["hf_eager"] = short_error(e)
                log(f"[{label}] HF eager B={b} FAILED: {short_error(e)}")
                traceback.print_exc()
            free_torch_memory(device)
        for r in recs:
            if args.skip_torch_compile:
                break
            b = r["batch"]
            try:
                log(f"[{label}] torch.compile reduce-overhead B={b} (compiling)")
                r["torch_compile"] = hf_compiled(model, prompts[b], args.steps, device, max_cache_len,
                                                 args.warmup_steps)
                tc = r["torch_compile"]
                log(f"[{label}] torch.compile B={b}: {tc['per_token_ms_median']:.3f} ms/token "
                    f"(compile + warm-up {tc['warmup_and_compile_s']:.1f} s)")
            except Exception as e:
                r["errors"]["torch_compile"] = short_error(e)
                log(f"[{label}] torch.compile B={b} FAILED, reported as missing: {short_error(e)}")
                traceback.print_exc()
            reset_compiler()
            free_torch_memory(device)
        del model
        free_torch_memory(device)

        for r in recs:
            if args.skip_weft:
                break
            b = r["batch"]
            with tempfile.TemporaryDirectory() as tmp:
                for mode in ("step", "resident", "loop"):
                    try:
                        log(f"[{label}] weft --mode {mode} B={b}")
                        w = run_weft(args, model_dir, prompts[b], args.steps, mode, tmp)
                        r[f"weft_{mode}"] = w
                        log(f"[{label}] weft {mode} B={b}: {fmt_ms(w['per_token_ms_median'])} ms/token "
                            f"({w['backend']}: {w['device']}; megakernel compile {fmt_ms(w['compile_ms'])} ms)")
                    except Exception as e:
                        r["errors"][f"weft_{mode}"] = short_error(e)
                        log(f"[{label}] weft {mode} B={b} FAILED: {type(e).__name__}: {e}")
        for r in recs:
            if "weft_step" in r and "hf_eager" in r:
                r["token_match"] = token_match(r["weft_step"]["tokens"], r["hf_eager"]["tokens"], MATCH_STEPS)
            if "torch_compile" in r and "hf_eager" in r:  # a sanity check of the static-cache recipe
                r["torch_compile"]["tokens_vs_eager"] = token_match(r["torch_compile"]["tokens"],
                                                                    r["hf_eager"]["tokens"], MATCH_STEPS)
            derive(r)
        if not args.keep:
            shutil.rmtree(model_dir, ignore_errors=True)
        else:
            for r in recs:
                r["model_dir"] = model_dir
        log(f"[{label}] done in {time.perf_counter() - t0:.1f} s")
        write()  # after every model, so that a run cut short keeps what it measured

    log("")
    copy_text = f"copy {bandwidth / 1e12:.3f} TB/s" if bandwidth else "copy bandwidth not measured (no floor)"
    log(f"decode, prompt {args.prompt_len}, {args.steps} tokens, bf16, {dev['name']}, {copy_text}")
    print_table(results)
    write()
    log(f"wrote {args.out}")
    return 0 if results and all(not r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
