"""Conformance: graphs built through the bindings, run on the CPU reference interpreter, checked against
numpy / torch computations of the same math."""
import numpy as np
import pytest
import torch

import weft
from helpers import (build_decoder_block, build_mlp, decoder_torch, decoder_values, mlp_numpy, mlp_values,
                     uniform)


def test_mlp_numpy_in_numpy_out(rng):
    g = build_mlp()
    v = mlp_values(rng, batch=5)
    out = g.run_reference(v)
    assert list(out) == ["y"]
    y = out["y"]
    assert isinstance(y, np.ndarray) and y.shape == (5, 32) and y.dtype == np.float32
    np.testing.assert_allclose(y, mlp_numpy(v), rtol=1e-4, atol=1e-5)


def test_mlp_symbolic_batch_takes_each_size(rng):
    g = build_mlp()
    for batch in (1, 3, 64):
        v = mlp_values(rng, batch=batch)
        np.testing.assert_allclose(g.run_reference(v)["y"], mlp_numpy(v), rtol=1e-4, atol=1e-5)


def test_mlp_output_written_in_place_and_keys_by_tensor(rng):
    g = build_mlp()
    v = mlp_values(rng)
    y = np.zeros((4, 32), np.float32)
    x = g.find("x")
    bindings = {x: v["x"], "w1": v["w1"], "b1": v["b1"], "w2": v["w2"], "b2": v["b2"]}
    out = g.run_reference(bindings, y=y)
    assert out["y"] is y
    np.testing.assert_allclose(y, mlp_numpy(v), rtol=1e-4, atol=1e-5)


def test_run_uses_the_reference_for_host_memory(rng):
    g = build_mlp()
    v = mlp_values(rng)
    np.testing.assert_array_equal(g.run(v)["y"], g.run_reference(v)["y"])


def test_mlp_torch_tensors_allocate_torch_outputs(rng):
    g = build_mlp()
    v = mlp_values(rng)
    out = g.run_reference({k: torch.from_numpy(a) for k, a in v.items()})["y"]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), mlp_numpy(v), rtol=1e-4, atol=1e-5)


class _DLPackOnly:
    """Exposes only the DLPack protocol, so the bindings must go through weft_tensor_view_from_dlpack."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _ArrayInterfaceOnly:
    def __init__(self, array):
        self.__array_interface__ = array.__array_interface__
        self._a = array


def test_mlp_inputs_through_dlpack_and_array_interface(rng):
    g = build_mlp()
    v = mlp_values(rng)
    bindings = {"x": _DLPackOnly(v["x"]), "w1": _DLPackOnly(torch.from_numpy(v["w1"])),
                "b1": _ArrayInterfaceOnly(v["b1"]), "w2": v["w2"], "b2": v["b2"]}
    y = np.zeros((4, 32), np.float32)
    g.run_reference(bindings, y=_DLPackOnly(y))
    np.testing.assert_allclose(y, mlp_numpy(v), rtol=1e-4, atol=1e-5)


def test_strided_inputs_are_read_without_copies(rng):
    g = build_mlp()
    v = mlp_values(rng)
    wide = uniform(rng, (4, 128))
    wide[:, ::2] = v["x"]
    v["x"] = wide[:, ::2]  # a view with stride 2: the reference interpreter reads it in place
    assert not v["x"].flags.c_contiguous
    w1t = np.ascontiguousarray(v["w1"].T)
    v["w1"] = w1t.T  # column-major
    np.testing.assert_allclose(g.run_reference(v)["y"], mlp_numpy(v), rtol=1e-4, atol=1e-5)


def test_decoder_block_bf16_against_torch(rng):
    g = build_decoder_block()
    v = decoder_values(rng)
    before_k = v["k_cache"].clone()
    ref_logits, ref_k, ref_v = decoder_torch({k: t.clone() for k, t in v.items()})
    out = g.run_reference(v)
    logits, next_token = out["logits"], out["next_token"]
    assert logits.dtype == torch.bfloat16 and logits.shape == (2, 256)
    assert next_token.dtype == torch.int32 and next_token.shape == (2,)

    scale = ref_logits.abs().max().item()
    assert scale > 0.1  # random non-zero data gives real logits, not a trivial pass
    np.testing.assert_allclose(logits.float().numpy(), ref_logits.numpy(), atol=2e-2 * scale)
    # The caches are STATE: updated in place at each row's position, untouched elsewhere.
    np.testing.assert_allclose(v["k_cache"].float().numpy(), ref_k.numpy(), atol=3e-2)
    np.testing.assert_allclose(v["v_cache"].float().numpy(), ref_v.numpy(), atol=3e-2)
    changed = (v["k_cache"] != before_k).any(-1).any(-1)
    assert changed[0, 3] and changed[1, 9] and changed.sum() == 2
    # argmax of its own logits; against torch's wherever the top-2 gap is clear of bf16 noise.
    assert torch.equal(next_token.long(), logits.float().argmax(-1))
    top2 = ref_logits.topk(2, -1).values
    clear = (top2[:, 0] - top2[:, 1]) > 2e-2 * scale
    assert torch.equal(next_token.long()[clear], ref_logits.argmax(-1)[clear])


def _run1(build, inputs, out_dtype=np.float32):
    """Builds a one-op graph with `build(g, *tensors)` over numpy `inputs` and returns its output."""
    g = weft.Graph("op")
    ts = [g.input(f"in{k}", a.dtype.name, list(a.shape)) for k, a in enumerate(inputs)]
    g.mark_output(build(g, *ts), "out")
    return g.run_reference({f"in{k}": a for k, a in enumerate(inputs)})["out"]


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _erf(x):
    return np.vectorize(__import__("math").erf)(x)


OPS = {
    "matmul": (lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (4, 5)], lambda a, b: a @ b),
    "add": (lambda g, a, b: g.add(a, b), [(3, 4), (4,)], lambda a, b: a + b),
    "mul": (lambda g, a, b: g.mul(a, b), [(3, 1), (3, 4)], lambda a, b: a * b),
    "silu": (lambda g, a: g.silu(a), [(3, 8)], lambda a: a / (1 + np.exp(-a))),
    "gelu": (lambda g, a: g.gelu(a), [(3, 8)], lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2)))),
    "silu_mul": (lambda g, a, b: g.silu_mul(a, b), [(3, 8), (3, 8)], lambda a, b: a / (1 + np.exp(-a)) * b),
    "softmax": (lambda g, a: g.softmax(a), [(3, 8)], _softmax),
    "layernorm": (lambda g, a, w, b: g.layernorm(a, w, b, eps=1e-5), [(3, 8), (8,), (8,)],
                  lambda a, w, b: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * w + b),
    "rmsnorm": (lambda g, a, w: g.rmsnorm(a, w, 1e-6), [(3, 8), (8,)],
                lambda a, w: a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6) * w),
    "head_rmsnorm": (lambda g, a, w: g.head_rmsnorm(a, w, 4, 1e-6), [(3, 8), (4,)],
                     lambda a, w: (a.reshape(3, 2, 4) / np.sqrt((a.reshape(3, 2, 4) ** 2).mean(-1, keepdims=True)
                                                                  + 1e-6) * w).reshape(3, 8)),
    "reduce_sum": (lambda g, a: g.reduce(a, "sum", 0), [(3, 8)], lambda a: a.sum(0)),
    "reduce_max": (lambda g, a: g.reduce(a, "max", -1, keepdim=True), [(3, 8)], lambda a: a.max(-1, keepdims=True)),
    "reduce_mean": (lambda g, a: g.reduce(a, "mean", 1), [(3, 8)], lambda a: a.mean(1)),
    "reshape": (lambda g, a: g.reshape(a, [4, 6]), [(2, 3, 4)], lambda a: a.reshape(4, 6)),
    "slice": (lambda g, a: g.slice(a, 1, 2, 5), [(3, 8)], lambda a: a[:, 2:5]),
    "concat": (lambda g, a, b: g.concat([a, b], 0), [(2, 4), (3, 4)], lambda a, b: np.concatenate([a, b], 0)),
    "linear": (lambda g, x, w, b, r: g.linear(x, w, b, r), [(3, 8), (5, 8), (5,), (3, 5)],
               lambda x, w, b, r: x @ w.T + b + r),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_float_op_against_numpy(op, rng):
    build, shapes, ref = OPS[op]
    inputs = [uniform(rng, s) for s in shapes]
    out = _run1(build, inputs)
    np.testing.assert_allclose(out, ref(*[a.astype(np.float64) for a in inputs]), rtol=2e-5, atol=2e-6)


def test_embedding_argmax_and_cast(rng):
    table = uniform(rng, (10, 4))
    ids = np.array([[3, 0], [9, 3]], dtype=np.int64)
    np.testing.assert_array_equal(_run1(lambda g, t, i: g.embedding(t, i), [table, ids]), table[ids])
    x = uniform(rng, (5, 7))
    np.testing.assert_array_equal(_run1(lambda g, a: g.argmax(a, "i32"), [x]), x.argmax(-1))
    np.testing.assert_array_equal(_run1(lambda g, a: g.cast(a, "i64"), [x * 10]), np.trunc(x * 10).astype(np.int64))
    casted = _run1(lambda g, a: g.cast(a, "f16"), [x])
    assert casted.dtype == np.float16
    np.testing.assert_array_equal(casted, x.astype(np.float16))


def test_generic_op_by_name_matches_helper(rng):
    x = uniform(rng, (3, 8))
    by_name = _run1(lambda g, a: g.op("gelu", [a], {"approximate": "tanh"}), [x])
    helper = _run1(lambda g, a: g.gelu(a, approximate="tanh"), [x])
    np.testing.assert_array_equal(by_name, helper)


def test_rope_interleaved_against_numpy(rng):
    x = uniform(rng, (2, 8))
    pos = np.array([1, 5], dtype=np.int32)
    out = _run1(lambda g, a, p: g.rope(a, p, head_dim=4, theta=100.0, style="interleaved"), [x, pos])
    freq = 100.0 ** (-np.arange(2) * 2 / 4)
    ang = pos[:, None, None] * freq[None, None, :]
    pairs = x.reshape(2, 2, 2, 2).astype(np.float64)  # [batch, head, pair, (even, odd)]
    even, odd = pairs[..., 0], pairs[..., 1]
    ref = np.stack([even * np.cos(ang) - odd * np.sin(ang), odd * np.cos(ang) + even * np.sin(ang)], -1)
    np.testing.assert_allclose(out, ref.reshape(2, 8), rtol=1e-5, atol=1e-6)


def test_bf16_outputs_with_torch_and_numpy(rng):
    g = weft.Graph("bf")
    x = g.input("x", "f32", [4])
    g.mark_output(g.cast(g.silu(x), "bf16"), "y")
    xs = uniform(rng, (4,))
    ref = xs / (1 + np.exp(-xs))
    y = g.run_reference(x=torch.from_numpy(xs))["y"]  # torch holds bf16: allocated as torch
    assert y.dtype == torch.bfloat16
    np.testing.assert_allclose(y.float().numpy(), ref, rtol=1e-2)
    try:
        import ml_dtypes  # noqa: F401  (numpy's bfloat16, when installed)
    except ImportError:
        with pytest.raises(weft.InvalidArgumentError, match="output 'y' is bf16"):
            g.run_reference(x=xs)
    else:
        np.testing.assert_allclose(g.run_reference(x=xs)["y"].astype(np.float32), ref, rtol=1e-2)


def test_fused_linear_helpers_equal_the_two_ops():
    rng = np.random.default_rng(7)
    g = weft.Graph("fused")
    x = g.input("x", "f32", [2, 256])
    nw = g.weight("nw", "f32", [256])
    w = g.weight("w", "f32", [8, 256])
    gu = g.input("gu", "f32", [2, 512])
    g.mark_output(g.rmsnorm_linear(x, nw, w, eps=1e-5, name="fused_norm"))
    g.mark_output(g.linear(g.rmsnorm(x, nw, eps=1e-5), w, name="norm_then_linear"))
    g.mark_output(g.silu_mul_linear(gu, w, name="fused_swiglu"))
    g.mark_output(g.linear(g.silu_mul(gu), w, name="swiglu_then_linear"))
    out = g.run_reference(x=rng.standard_normal((2, 256), dtype=np.float32),
                          nw=rng.standard_normal(256, dtype=np.float32),
                          w=rng.standard_normal((8, 256), dtype=np.float32),
                          gu=rng.standard_normal((2, 512), dtype=np.float32))
    np.testing.assert_array_equal(out["fused_norm"], out["norm_then_linear"])
    np.testing.assert_array_equal(out["fused_swiglu"], out["swiglu_then_linear"])


def test_linear_silu_mul_equals_linear_then_silu_mul():
    rng = np.random.default_rng(12)
    g = weft.Graph("swiglu_epilogue")
    x = g.input("x", "f32", [3, 256])
    w = g.weight("w", "f32", [2 * 40, 256])
    nw = g.weight("nw", "f32", [256])
    g.mark_output(g.linear_silu_mul(x, w, name="fused"))
    g.mark_output(g.silu_mul(g.linear(x, w), name="separate"))
    g.mark_output(g.linear_silu_mul(x, w, norm_weight=nw, eps=1e-5, name="fused_norm"))
    g.mark_output(g.silu_mul(g.linear(g.rmsnorm(x, nw, eps=1e-5), w), name="norm_then_separate"))
    out = g.run_reference(x=rng.standard_normal((3, 256), dtype=np.float32),
                          w=rng.standard_normal((80, 256), dtype=np.float32),
                          nw=rng.standard_normal(256, dtype=np.float32))
    assert out["fused"].shape == (3, 40)
    np.testing.assert_array_equal(out["fused"], out["separate"])
    np.testing.assert_array_equal(out["fused_norm"], out["norm_then_separate"])


def test_attention_decode_qkv_equals_the_ops_it_replaces():
    rng = np.random.default_rng(11)
    hq, hkv, hd, b, s = 4, 2, 8, 2, 5
    rope = {"theta": 10000.0, "style": "half"}

    def build(fused):
        g = weft.Graph("fused" if fused else "separate")
        qkv = g.input("qkv", "f32", [b, (hq + 2 * hkv) * hd])
        kc, vc = g.state("k_cache", "f32", [b, s, hkv, hd]), g.state("v_cache", "f32", [b, s, hkv, hd])
        pos = g.input("positions", "i32", [b])
        qn, kn = g.weight("q_norm", "f32", [hd]), g.weight("k_norm", "f32", [hd])
        if fused == "table":
            table = g.rope_table(pos, hd, rope=rope)
            out = g.attention_decode_qkv(qkv, kc, vc, pos, hq, hkv, hd, q_norm_weight=qn, k_norm_weight=kn, rope=rope,
                                         rope_table=table)
        elif fused:
            out = g.attention_decode_qkv(qkv, kc, vc, pos, hq, hkv, hd, q_norm_weight=qn, k_norm_weight=kn, rope=rope)
        else:
            q = g.rope(g.head_rmsnorm(g.slice(qkv, 1, 0, hq * hd), qn, hd), pos, hd, **rope)
            k = g.rope(g.head_rmsnorm(g.slice(qkv, 1, hq * hd, (hq + hkv) * hd), kn, hd), pos, hd, **rope)
            v = g.slice(qkv, 1, (hq + hkv) * hd, (hq + 2 * hkv) * hd)
            out = g.attention_decode(q, k, v, kc, vc, pos, hq, hkv, hd)
        g.mark_output(out, "out")
        return g

    values = dict(qkv=rng.standard_normal((b, (hq + 2 * hkv) * hd), dtype=np.float32),
                  k_cache=rng.standard_normal((b, s, hkv, hd), dtype=np.float32),
                  v_cache=rng.standard_normal((b, s, hkv, hd), dtype=np.float32),
                  positions=np.array([4, 1], dtype=np.int32),
                  q_norm=rng.standard_normal(hd, dtype=np.float32), k_norm=rng.standard_normal(hd, dtype=np.float32))
    fused, separate = build(True).run_reference(**values), build(False).run_reference(**values)
    np.testing.assert_array_equal(fused["out"], separate["out"])
    # Rotated by a rope_table op's cos / sin: the same values.
    np.testing.assert_array_equal(build("table").run_reference(**values)["out"], separate["out"])
