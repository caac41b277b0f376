#!/usr/bin/env python3
"""Check weft's greedy decode against Hugging Face transformers.

For each model shape, build a random-initialized bf16 model from a config (no
network needed), save it with save_pretrained, run HF greedy decode, then run
the weft `generate` sample on the saved folder. Random weights give near-tied
logits, so tokens are only compared where HF's own top-2 gap is clear:

  teacher-forced: weft consumes HF's tokens; logits rel. error <= 2e-2 at every
                  step, argmax agrees wherever HF's top-2 gap > 1% of its range.
  free-running:   weft's tokens (step and loop modes) equal HF's up to the first
                  step where HF's top-2 gap falls under that threshold.

Exit code 0 if every check passes, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import transformers

REL_ERR_TOL = 2e-2
GAP_FRAC = 0.01  # "clear" argmax: top-2 gap > GAP_FRAC * (max - min) of HF logits

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
MODELS = {
    "llama-3.2-1b": dict(model_type="llama", hidden_size=2048, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         intermediate_size=8192, vocab_size=128256, rope_theta=500000.0,
                         rope_scaling=LLAMA3_SCALING, tie_word_embeddings=True,
                         rms_norm_eps=1e-5, max_position_embeddings=131072,
                         hidden_act="silu", attention_bias=False, mlp_bias=False),
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       intermediate_size=3072, vocab_size=151936, rope_theta=1e6,
                       tie_word_embeddings=True, rms_norm_eps=1e-6,
                       max_position_embeddings=40960, attention_bias=False),
    "qwen3-8b-2l": dict(model_type="qwen3", hidden_size=4096, num_hidden_layers=2,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                        intermediate_size=12288, vocab_size=151936, rope_theta=1e6,
                        tie_word_embeddings=False, rms_norm_eps=1e-6,
                        max_position_embeddings=40960, attention_bias=False),
}
TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=128, vocab_size=512)


def log(*a):
    print(*a, flush=True)


def make_config(name, tiny=False):
    spec = dict(MODELS[name])
    if tiny:
        spec.update(TINY)
    model_type = spec.pop("model_type")
    theta = spec.pop("rope_theta")
    scaling = spec.pop("rope_scaling", None)
    cls = transformers.LlamaConfig if model_type == "llama" else transformers.Qwen3Config
    # transformers 5.x keeps rope settings in `rope_parameters`; 4.x uses rope_theta/rope_scaling.
    if "rope_parameters" in cls().to_dict():
        spec["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=theta)
    else:
        spec["rope_theta"] = theta
        if scaling:
            spec["rope_scaling"] = dict(scaling)
    # No EOS: generation must run all N steps even if a random model emits the EOS id.
    cfg = cls(bos_token_id=None, eos_token_id=None, pad_token_id=0, **spec)
    return cfg, scaling, theta


def fix_saved_config(path, theta, scaling):
    """weft's loader reads top-level rope_theta / rope_scaling / dtype; add them if missing."""
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    rp = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rp.get("rope_theta", theta))
    if scaling and not cfg.get("rope_scaling"):
        cfg["rope_scaling"] = {k: rp.get(k, v) for k, v in scaling.items()}
    if "torch_dtype" not in cfg and "dtype" not in cfg:
        cfg["torch_dtype"] = "bfloat16"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    return cfg


def build_and_save(name, path, tiny, device, seed, unit_norms=False):
    cfg, scaling, theta = make_config(name, tiny)
    torch.manual_seed(seed)
    dtype_kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, **{dtype_kw: torch.bfloat16})
    model.eval()
    if not unit_norms:
        # Default init sets RMSNorm weights to 1, which would hide a weft bug that ignores them.
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n.endswith("norm.weight"):
                    p.add_(0.1 * torch.randn_like(p))
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path, safe_serialization=True)
    return model, fix_saved_config(path, theta, scaling)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def hf_generate(model, prompts, steps, device):
    """Returns HF's generated tokens [B, N] and float32 logits [N, B, V] (step j predicts token j)."""
    ids = prompts.to(device)
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=steps,
              do_sample=False, output_logits=True, return_dict_in_generate=True, use_cache=True)
    out = model.generate(ids, **kw)
    # Second identical run for timing only: the first one pays for warmup.
    sync(device)
    t0 = time.perf_counter()
    model.generate(ids, **kw)
    sync(device)
    ms = (time.perf_counter() - t0) * 1e3 / steps
    tokens = out.sequences[:, ids.shape[1]:].cpu()
    logits = torch.stack([l.float().cpu() for l in out.logits])
    assert tokens.shape[1] == steps and logits.shape[0] == steps, "HF generate stopped early"
    return tokens, logits, ms


@torch.no_grad()
def fp32_logits(model, prompts, hf_tokens, device):
    """Teacher-forced logits [N, B, V] of the same weights in float32: the yardstick both bf16 runs are
    measured against (how far HF's own bf16 arithmetic is from it says how much disagreement is rounding)."""
    seq = torch.cat([prompts, hf_tokens[:, :-1]], dim=1).to(device)
    out = model(seq, attention_mask=torch.ones_like(seq), use_cache=False).logits.float()
    p = prompts.shape[1]
    return out[:, p - 1:, :].transpose(0, 1).cpu()


def rel_err(a, b):
    return float(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-30)).max())


def gap_stats(hf_logits):
    """Per (step, row): top-2 gap and whether it is clear of the near-tie threshold."""
    top2 = hf_logits.topk(2, dim=-1).values
    gap = top2[..., 0] - top2[..., 1]
    span = hf_logits.amax(-1) - hf_logits.amin(-1)
    return gap, gap > GAP_FRAC * span


def teacher_forced_check(hf_logits, weft_logits):
    """hf_logits, weft_logits: float32 [N, B, V]."""
    rel = (weft_logits - hf_logits).norm(dim=-1) / hf_logits.norm(dim=-1).clamp_min(1e-30)
    _, clear = gap_stats(hf_logits)
    mismatch = (weft_logits.argmax(-1) != hf_logits.argmax(-1)) & clear
    bad = [[int(j), int(b)] for j, b in mismatch.nonzero().tolist()]
    max_rel = float(rel.max())
    return {"max_rel_err": max_rel, "rel_err_ok": bool(max_rel <= REL_ERR_TOL),
            "rel_err_per_step": rel.amax(-1).tolist(),
            "argmax_checked": int(clear.sum()), "argmax_total": int(clear.numel()),
            "argmax_mismatches": bad,  # [step, row]
            "pass": bool(max_rel <= REL_ERR_TOL and not bad)}


def free_running_check(hf_logits, hf_tokens, weft_tokens):
    """Tokens must match up to (excluding) each row's first near-tie step in HF's logits."""
    _, clear = gap_stats(hf_logits)  # [N, B]
    steps, rows = clear.shape
    out = {"rows": [], "pass": True}
    for b in range(rows):
        ties = (~clear[:, b]).nonzero()
        required = int(ties[0]) if len(ties) else steps
        hf, w = hf_tokens[b].tolist(), list(weft_tokens[b])
        matched = next((j for j in range(min(len(hf), len(w))) if hf[j] != w[j]), min(len(hf), len(w)))
        ok = matched >= required
        out["rows"].append({"matched": matched, "required": required, "ok": ok,
                            "first_near_tie": required if len(ties) else None})
        out["pass"] &= ok
    out["matched"] = sum(r["matched"] if r["matched"] < r["required"] else r["required"] for r in out["rows"])
    out["required"] = sum(r["required"] for r in out["rows"])
    return out


def run_weft(args, model_dir, prompts, steps, mode, force=None, logits_out=None, tmp="."):
    """Runs the weft generate sample; returns (its JSON dict, logits [N, B, V] or None)."""
    fmt = lambda rows: ";".join(",".join(str(int(t)) for t in r) for r in rows)
    json_out = os.path.join(tmp, f"weft_{mode}_{'tf' if force is not None else 'free'}.json")
    seq = prompts.shape[1] + steps
    cmd = [args.generate, model_dir, "--prompt-ids", fmt(prompts.tolist()), "--steps", str(steps),
           "--mode", mode, "--backend", args.backend, "--json", json_out,
           "--max-seq", str((seq + 63) // 64 * 64)]
    if force is not None:
        cmd += ["--force-ids", fmt(force.tolist())]
    if logits_out:
        cmd += ["--logits-out", logits_out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        raise RuntimeError(f"weft_generate exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    with open(json_out) as f:
        res = json.load(f)
    logits = None
    if logits_out:
        with open(logits_out, "rb") as f:
            flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        logits = flat.reshape(steps, prompts.shape[0], -1)
    return res, logits


def compare(args, name, batch, model_dir, prompts, hf_tokens, hf_logits, hf_ms, f32_logits):
    res = {"model": name, "batch": batch, "hf_per_token_ms": hf_ms, "pass": False}
    steps = hf_tokens.shape[1]
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        try:
            lpath = os.path.join(tmp, "logits.f32")
            _, w_logits = run_weft(args, model_dir, prompts, steps, "step", force=hf_tokens,
                                   logits_out=lpath, tmp=tmp)
            if w_logits.shape != hf_logits.shape:
                raise RuntimeError(f"weft logits shape {tuple(w_logits.shape)} != HF {tuple(hf_logits.shape)}")
            res["teacher_forced"] = teacher_forced_check(hf_logits, w_logits)
            res["teacher_forced"]["weft_vs_fp32_max_rel"] = rel_err(w_logits, f32_logits)
            res["teacher_forced"]["hf_bf16_vs_fp32_max_rel"] = rel_err(hf_logits, f32_logits)
            for mode in ("step", "loop"):
                w, _ = run_weft(args, model_dir, prompts, steps, mode, tmp=tmp)
                fr = free_running_check(hf_logits, hf_tokens, w["tokens"])
                fr.update(backend=w.get("backend"), device=w.get("device"),
                          per_token_ms_median=w.get("per_token_ms_median"),
                          prefill_ms=w.get("prefill_ms"))
                res[f"free_{mode}"] = fr
        except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
            res["error"] = str(e)
            log(f"  ERROR {name} b={batch}: {e}")
            return res
    res["pass"] = res["teacher_forced"]["pass"] and res["free_step"]["pass"] and res["free_loop"]["pass"]
    return res


def print_table(results):
    hdr = ["model", "B", "tf max rel", "weft/fp32", "HF/fp32", "argmax agree", "free step", "free loop",
           "weft step ms", "weft loop ms", "HF ms", "result"]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["model"], str(r["batch"]), "-", "-", "-", "-", "-", "-", "-", "-",
                         f"{r['hf_per_token_ms']:.2f}", "ERROR"])
            continue
        tf, fs, fl = r["teacher_forced"], r["free_step"], r["free_loop"]
        agree = tf["argmax_checked"] - len(tf["argmax_mismatches"])
        ms = lambda v: "-" if v is None else f"{v:.3f}"
        rows.append([r["model"], str(r["batch"]), f"{tf['max_rel_err']:.2e}",
                     f"{tf['weft_vs_fp32_max_rel']:.2e}", f"{tf['hf_bf16_vs_fp32_max_rel']:.2e}",
                     f"{agree}/{tf['argmax_checked']} (of {tf['argmax_total']})",
                     f"{fs['matched']}/{fs['required']}", f"{fl['matched']}/{fl['required']}",
                     ms(fs["per_token_ms_median"]), ms(fl["per_token_ms_median"]),
                     f"{r['hf_per_token_ms']:.2f}", "PASS" if r["pass"] else "FAIL"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    for row in [hdr] + rows:
        log("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--generate", default="build/samples/weft_generate")
    ap.add_argument("--backend", default="auto", choices=["auto", "gpu", "reference"])
    ap.add_argument("--work", default="/tmp/hf_compare")
    ap.add_argument("--keep", action="store_true", help="keep the saved checkpoints")
    ap.add_argument("--out", default=os.path.join(os.environ["OUT"], "hf_compare.json")
                    if os.environ.get("OUT") else "hf_compare.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per weft run")
    ap.add_argument("--unit-norms", action="store_true", help="keep RMSNorm weights at 1 (HF's init)")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # CPU smoke test
    args = ap.parse_args()
    args.generate = os.path.abspath(args.generate)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    batches = [int(b) for b in args.batches.split(",")]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; known: {', '.join(MODELS)}")
    os.makedirs(args.work, exist_ok=True)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device}")

    results = []
    for mi, name in enumerate(models):
        model_dir = os.path.join(args.work, name + ("-tiny" if args.tiny else ""))
        shutil.rmtree(model_dir, ignore_errors=True)
        log(f"[{name}] building random bf16 model -> {model_dir}")
        model, cfg = build_and_save(name, model_dir, args.tiny, device, args.seed + mi, args.unit_norms)
        hf = {}
        for batch in batches:
            g = torch.Generator().manual_seed(args.seed * 1000 + mi * 10 + batch)
            prompts = torch.randint(0, cfg["vocab_size"], (batch, args.prompt_len), generator=g)
            log(f"[{name}] HF generate batch={batch} P={args.prompt_len} N={args.steps}")
            hf[batch] = (prompts, *hf_generate(model, prompts, args.steps, device))
        model.float()  # the same weights, upcast: the fp32 yardstick
        for batch in batches:
            hf[batch] = (*hf[batch], fp32_logits(model, hf[batch][0], hf[batch][1], device))
        # Free the HF model before weft needs the GPU.
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
        for batch in batches:
            log(f"[{name}] weft batch={batch}")
            r = compare(args, name, batch, model_dir, *hf[batch])
            log(f"[{name}] batch={batch}: {'PASS' if r['pass'] else 'FAIL'}")
            results.append(r)
        if not args.keep:
            shutil.rmtree(model_dir, ignore_errors=True)

    print_table(results)
    ok = bool(results) and all(r["pass"] for r in results)
    summary = {"pass": ok, "torch": torch.__version__, "transformers": transformers.__version__,
               "device": str(device), "tiny": args.tiny, "prompt_len": args.prompt_len,
               "steps": args.steps, "rel_err_tol": REL_ERR_TOL, "gap_frac": GAP_FRAC,
               "results": results}
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=2)
    log(f"wrote {args.out}; {'ALL PASS' if ok else 'FAILURES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
