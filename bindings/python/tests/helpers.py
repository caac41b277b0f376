"""Graph builders and plain torch / numpy references shared by the tests."""
import math

import numpy as np

import weft


def uniform(rng, shape, scale=1.0, dtype=np.float32):
    """Random non-zero values in [-scale, scale)."""
    v = rng.uniform(-scale, scale, size=shape).astype(dtype)
    v[v == 0] = scale / 2
    return v


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def build_mlp(d_in=64, d_hidden=128, d_out=32, dtype="f32"):
    """samples/mlp.c's graph: linear -> gelu (tanh) -> linear with a symbolic batch."""
    g = weft.Graph("mlp")
    g.declare_symbol("batch", 1, 64)
    x = g.input("x", dtype, ["batch", d_in])
    w1, b1 = g.weight("w1", dtype, [d_hidden, d_in]), g.weight("b1", dtype, [d_hidden])
    w2, b2 = g.weight("w2", dtype, [d_out, d_hidden]), g.weight("b2", dtype, [d_out])
    h = g.gelu(g.linear(x, w1, b1, name="h"), approximate="tanh", name="a")
    g.mark_output(g.linear(h, w2, b2, name="y"))
    return g


def mlp_values(rng, batch=4, d_in=64, d_hidden=128, d_out=32):
    return {"x": uniform(rng, (batch, d_in)), "w1": uniform(rng, (d_hidden, d_in), 0.125),
            "b1": uniform(rng, (d_hidden,), 0.1), "w2": uniform(rng, (d_out, d_hidden), 0.09),
            "b2": uniform(rng, (d_out,), 0.1)}


def mlp_numpy(v):
    h = gelu_tanh(v["x"].astype(np.float64) @ v["w1"].T + v["b1"])
    return h @ v["w2"].T + v["b2"]


# samples/decoder_block.cpp's shape: one Qwen3-style decoder layer for one decode step.
VOCAB, DIM, QH, KVH, HD, FFN, MAX_SEQ = 256, 64, 4, 2, 16, 128, 32
THETA, EPS = 1e6, 1e-6


def build_decoder_block():
    g = weft.Graph("decoder_block")
    g.declare_symbol("batch", 1, 8)
    bf = "bf16"
    qw, kvw = QH * HD, KVH * HD
    ids, pos = g.input("ids", "i32", ["batch"]), g.input("positions", "i32", ["batch"])
    w = {name: g.weight(name, bf, shape) for name, shape in decoder_weight_shapes().items()}
    kc = g.state("k_cache", bf, ["batch", MAX_SEQ, KVH, HD])
    vc = g.state("v_cache", bf, ["batch", MAX_SEQ, KVH, HD])
    h = g.embedding(w["embed"], ids, name="h")
    qkv = g.linear(g.rmsnorm(h, w["attn_norm"], EPS, name="attn_in"), w["wqkv"], name="qkv")
    q = g.rope(g.head_rmsnorm(g.slice(qkv, -1, 0, qw, name="q_raw"), w["q_norm"], HD, EPS, name="q_normed"),
               pos, head_dim=HD, theta=THETA, style="half", name="q")
    k = g.rope(g.head_rmsnorm(g.slice(qkv, -1, qw, qw + kvw, name="k_raw"), w["k_norm"], HD, EPS, name="k_normed"),
               pos, head_dim=HD, theta=THETA, style="half", name="k")
    v = g.slice(qkv, -1, qw + kvw, qw + 2 * kvw, name="v")
    a = g.attention_decode(q, k, v, kc, vc, pos, num_q_heads=QH, num_kv_heads=KVH, head_dim=HD, name="attn")
    h2 = g.linear(a, w["wo"], residual=h, name="h2")
    gu = g.linear(g.rmsnorm(h2, w["mlp_norm"], EPS, name="mlp_in"), w["w_gate_up"], name="gate_up")
    h3 = g.linear(g.silu_mul(gu, name="act"), w["w_down"], residual=h2, name="h3")
    logits = g.linear(g.rmsnorm(h3, w["final_norm"], EPS, name="final"), w["lm_head"], name="logits")
    g.mark_output(logits)
    g.mark_output(g.argmax(logits, "i32", name="next_token"))
    return g


def decoder_weight_shapes():
    qw, kvw = QH * HD, KVH * HD
    return {"embed": [VOCAB, DIM], "attn_norm": [DIM], "wqkv": [qw + 2 * kvw, DIM], "q_norm": [HD],
            "k_norm": [HD], "wo": [DIM, qw], "mlp_norm": [DIM], "w_gate_up": [2 * FFN, DIM],
            "w_down": [DIM, FFN], "final_norm": [DIM], "lm_head": [VOCAB, DIM]}


def decoder_values(rng, batch=2):
    """bf16 torch tensors: weights, caches full of earlier (random) keys and values, ids and positions."""
    import torch

    v = {}
    for name, shape in decoder_weight_shapes().items():
        if len(shape) == 1:  # norm weights near 1
            v[name] = torch.from_numpy(1.0 + uniform(rng, shape, 0.2)).bfloat16()
        else:
            v[name] = torch.from_numpy(uniform(rng, shape, 0.25)).bfloat16()
    for name in ("k_cache", "v_cache"):
        v[name] = torch.from_numpy(uniform(rng, (batch, MAX_SEQ, KVH, HD))).bfloat16()
    v["ids"] = torch.tensor([17, 200, 3, 99][:batch], dtype=torch.int32)
    v["positions"] = torch.tensor([3, 9, 0, 31][:batch], dtype=torch.int32)
    return v


def decoder_torch(v):
    """The decoder block in float32 torch, rounding each op's result to bf16 as weft does. Returns the
    logits and the updated caches (float32)."""
    import torch

    def r(t):
        return t.bfloat16().float()

    f = {k: t.float() for k, t in v.items()}
    pos = v["positions"].long()
    batch = pos.shape[0]

    def rms(x, w, d):
        xs = x.reshape(*x.shape[:-1], -1, d)
        out = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + EPS) * w
        return r(out.reshape(x.shape))

    def rope(x):
        xs = x.reshape(batch, -1, HD)
        half = HD // 2
        freq = THETA ** (-torch.arange(half, dtype=torch.float64) * 2 / HD)
        ang = pos[:, None].double() * freq[None, :]
        cos, sin = torch.cos(ang).float()[:, None, :], torch.sin(ang).float()[:, None, :]
        a, b = xs[..., :half], xs[..., half:]
        return r(torch.cat([a * cos - b * sin, b * cos + a * sin], -1).reshape(batch, -1))

    qw, kvw = QH * HD, KVH * HD
    h = f["embed"][v["ids"].long()]
    qkv = r(rms(h, f["attn_norm"], DIM) @ f["wqkv"].T)
    q = rope(rms(qkv[:, :qw], f["q_norm"], HD))
    k = rope(rms(qkv[:, qw:qw + kvw], f["k_norm"], HD))
    val = qkv[:, qw + kvw:]
    kc, vc = f["k_cache"].clone(), f["v_cache"].clone()
    out = torch.zeros(batch, qw)
    for b in range(batch):
        p = int(pos[b])
        kc[b, p], vc[b, p] = k[b].reshape(KVH, HD), val[b].reshape(KVH, HD)
        for hq in range(QH):
            hk = hq // (QH // KVH)
            s = (kc[b, :p + 1, hk] @ q[b, hq * HD:(hq + 1) * HD]) / math.sqrt(HD)
            out[b, hq * HD:(hq + 1) * HD] = torch.softmax(s, 0) @ vc[b, :p + 1, hk]
    a = r(out)
    h2 = r(a @ f["wo"].T + h)
    gu = r(rms(h2, f["mlp_norm"], DIM) @ f["w_gate_up"].T)
    act = r(torch.nn.functional.silu(gu[:, :FFN]) * gu[:, FFN:])
    h3 = r(act @ f["w_down"].T + h2)
    logits = r(rms(h3, f["final_norm"], DIM) @ f["lm_head"].T)
    return logits, kc, vc


def gpu_skip_reason():
    """None when a GPU test can run, else why not (printed by pytest -rs)."""
    reason = weft.cuda_unavailable_reason()
    if reason:
        return f"no CUDA device: {reason}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None
