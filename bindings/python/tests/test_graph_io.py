"""Introspection, canonical JSON, hashing and text of graphs."""
import json

import numpy as np

import weft
from helpers import build_decoder_block, build_mlp, mlp_values


def test_tensor_info_outputs_and_symbols():
    g = build_mlp()
    x = g.find("x")
    info = x.info()
    assert (info.name, info.kind, info.dtype, info.shape, info.is_output) == \
        ("x", weft.TensorKind.INPUT, weft.DType.F32, ("batch", 64), False)
    assert [t.name for t in g.outputs] == ["y"]
    assert g.outputs[0].info().is_output
    assert [t.name for t in g.bound_tensors] == ["x", "w1", "b1", "w2", "b2"]
    assert g.symbols == {"batch": (1, 64)}
    assert g.find("w1").kind == weft.TensorKind.WEIGHT
    assert g.find("h").kind == weft.TensorKind.INTERMEDIATE


def test_json_round_trip_keeps_structure_hash_and_results(rng):
    g = build_decoder_block()
    text = g.to_json()
    doc = json.loads(text)
    assert doc["format"] == "weft-graph" and len(doc["ops"]) > 10
    g2 = weft.Graph.from_json(text)
    assert g2.to_json() == text
    assert g2.hash() == g.hash()
    assert g2.text() == g.text()
    m, m2 = build_mlp(), weft.Graph.from_json(build_mlp().to_json())
    v = mlp_values(rng)
    np.testing.assert_array_equal(m.run_reference(v)["y"], m2.run_reference(v)["y"])


def test_hash_ignores_names_and_sees_structure():
    def graph(name_x, width, approx):
        g = weft.Graph("g")
        x = g.input(name_x, "f32", [4, width])
        g.mark_output(g.gelu(x, approximate=approx))
        return g

    base = graph("x", 8, "none").hash()
    assert isinstance(base, int) and 0 < base < 2 ** 128
    assert graph("renamed", 8, "none").hash() == base
    assert graph("x", 16, "none").hash() != base
    assert graph("x", 8, "tanh").hash() != base
    assert f"{base:032x}" in graph("x", 8, "none").text()  # the listing prints the same hash


def test_text_lists_every_op():
    text = build_decoder_block().text()
    for op in ("embedding", "rmsnorm", "head_rmsnorm", "rope", "attention_decode", "silu_mul", "argmax"):
        assert f"= {op}(" in text
    assert "symbol batch in [1, 8]" in text


def test_graph_validate_and_outlives_its_context():
    ctx = weft.Context()
    g = weft.Graph("g", context=ctx)
    ctx.close()
    x = g.input("x", "f32", [4])
    g.mark_output(g.silu(x))
    g.validate()
    out = g.run_reference(x=np.ones(4, np.float32))
    np.testing.assert_allclose(out[g.outputs[0].name], np.full(4, 1 / (1 + np.exp(-1))), rtol=1e-6)


def test_symbol_policy_survives_json_and_is_left_out_of_the_hash(rng):
    g = build_mlp()
    base_json, base_hash = g.to_json(), g.hash()
    g.set_symbol_policy("batch", "buckets", [4, 16])
    (sym,) = json.loads(g.to_json())["symbols"]
    assert (sym["name"], sym["policy"], sym["buckets"]) == ("batch", "buckets", [4, 16, 64])  # the maximum added
    assert g.hash() == base_hash  # the kernels for one value are the same under every policy
    back = weft.Graph.from_json(g.to_json())
    assert back.to_json() == g.to_json() and back.hash() == base_hash

    back.set_symbol_policy("batch", weft.SymbolPolicy.RUNTIME)
    (sym,) = json.loads(back.to_json())["symbols"]
    assert sym["policy"] == "runtime" and "buckets" not in sym
    again = weft.Graph.from_json(back.to_json())
    assert again.to_json() == back.to_json()
    back.set_symbol_policy("batch", "buckets")  # no list: powers of two
    (sym,) = json.loads(back.to_json())["symbols"]
    assert sym["policy"] == "buckets" and "buckets" not in sym
    back.set_symbol_policy("batch", "exact")
    assert json.loads(back.to_json())["symbols"][0]["policy"] == "exact"
    back.set_symbol_policy("batch", "auto")  # the default is not written
    assert back.to_json() == base_json

    v = mlp_values(rng, batch=5)  # the reference does not depend on the policy
    np.testing.assert_array_equal(g.run_reference(v)["y"], build_mlp().run_reference(v)["y"])
