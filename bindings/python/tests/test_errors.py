"""Every error path raises a WeftError subclass carrying the status and weft's own message."""
import ctypes
import json

import numpy as np
import pytest
import torch

import weft
from helpers import build_mlp, mlp_values


def _last_message():
    return weft.lib().weft_last_error_message().decode()


def _raises(cls, status, *fragments):
    """pytest.raises for a WeftError whose message holds every fragment; also checks the message is weft's
    thread-local one (not re-worded by the bindings) for errors weft itself reported."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            e = self.info.value
            assert isinstance(e, weft.WeftError) and e.status == status
            for f in fragments:
                assert f in e.message, f"{f!r} not in {e.message!r}"
            assert str(e) == f"WEFT_ERROR_{status.name}: {e.message}"
            return handled

    return _Check()


S = weft.Status


def test_shape_mismatch_names_op_operand_and_dim():
    g = weft.Graph("g")
    x = g.input("x", "f32", [4, 64])
    w = g.weight("w", "f32", [32, 48])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "op 'linear'", "operand 'weight'", "48", "64"):
        g.linear(x, w)
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "op 'add'", "do not broadcast"):
        g.add(x, g.input("y", "f32", [3, 64]))
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "op 'silu'", "expected a float dtype"):
        g.silu(g.input("ids", "i32", [4]))


def test_message_is_weft_last_error_message():
    g = weft.Graph("g")
    with pytest.raises(weft.WeftError) as info:
        g.op("frobnicate", [])
    assert info.value.message == _last_message()
    assert "unknown op 'frobnicate'" in info.value.message


def test_undefined_symbol():
    g = weft.Graph("g")
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "symbol 'batch'", "not declared"):
        g.input("x", "f32", ["batch", 4])
    x = g.input("x", "f32", [4, 4])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "'seq'", "not declared"):
        g.reshape(x, ["seq", 16])


def test_bad_declarations():
    g = weft.Graph("g")
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "[9, 8] is empty"):
        g.declare_symbol("batch", 9, 8)
    g.declare_symbol("batch", 1, 8)
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "already declared"):
        g.declare_symbol("batch", 1, 8)
    g.input("x", "f32", [4])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "'x' is already used"):
        g.weight("x", "f32", [4])
    with pytest.raises(weft.InvalidArgumentError, match="dtype 'f64' is not supported"):
        g.input("z", "f64", [4])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "op 'silu'", "unknown attribute 'alpha'"):
        g.op("silu", ["x"], {"alpha": 2})


def test_symbol_policy_errors_name_the_problem():
    g = build_mlp()
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "weft_graph_set_symbol_policy",
                 "symbol 'seq' is not declared"):
        g.set_symbol_policy("seq", "exact")
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "symbol 'batch'", "bucket 1 is 4",
                 "not above the one before (8)", "ascending"):
        g.set_symbol_policy("batch", "buckets", [8, 4])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "symbol 'batch'", "bucket 0 is 100", "[1, 64]"):
        g.set_symbol_policy("batch", "buckets", [100])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "symbol 'batch'",
                 "a bucket list is only for the BUCKETS policy"):
        g.set_symbol_policy("batch", "runtime", [4, 8])
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "symbol 'batch'", "policy 7"):
        g.set_symbol_policy("batch", 7)
    with pytest.raises(weft.InvalidArgumentError, match="policy is 'fastest'; expected one of auto, exact, buckets"):
        g.set_symbol_policy("batch", "fastest")
    with pytest.raises(weft.InvalidArgumentError, match="bucket 0 is 2.5; expected an int"):
        g.set_symbol_policy("batch", "buckets", [2.5])
    assert "policy" not in json.loads(g.to_json())["symbols"][0]  # a refused policy changes nothing


def test_negative_max_loaded_kernels_is_refused_before_any_device():
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "weft_program_create", "max_loaded_kernels is -1"):
        weft.Program(build_mlp(), max_loaded_kernels=-1)


def test_wrong_binding_shape_names_tensor_and_dim(rng):
    g = build_mlp()
    v = mlp_values(rng)
    v["w1"] = v["w1"][:, :32]
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "weft_graph_run_reference", "weight 'w1'",
                 "dim 1", "32", "expected 64"):
        g.run_reference(v)


def test_symbol_out_of_range_and_disagreeing(rng):
    g = build_mlp()
    v = mlp_values(rng, batch=65)  # batch is declared in [1, 64]
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "batch", "65"):
        g.run_reference(v)


def test_missing_and_wrong_bindings(rng):
    g = build_mlp()
    v = mlp_values(rng)
    del v["b2"]
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "weight 'b2' is not bound"):
        g.run_reference(v)
    v = mlp_values(rng)
    v["x"] = v["x"].astype(np.int32)
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "'x'", "i32"):
        g.run_reference(v)
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "no tensor named 'nope'"):
        g.run_reference(mlp_values(rng), nope=np.zeros(3, np.float32))
    with pytest.raises(weft.InvalidArgumentError, match="float64 is not supported"):
        g.run_reference(mlp_values(rng), y=np.zeros((4, 32)))
    with pytest.raises(weft.InvalidArgumentError, match="list is not an array"):
        g.run_reference(mlp_values(rng), x=[[1.0] * 64] * 4)


def test_read_only_output_and_device_memory_are_refused(rng):
    g = build_mlp()
    y = np.zeros((4, 32), np.float32)
    y.flags.writeable = False
    with pytest.raises(weft.InvalidArgumentError, match="'y' is read-only"):
        g.run_reference(mlp_values(rng), y=y)

    class FakeDevice:  # device memory as __cuda_array_interface__ describes it; never dereferenced
        __cuda_array_interface__ = {"shape": (4, 64), "typestr": "<f4", "data": (0x1000, False), "version": 3}

    v = mlp_values(rng)
    v["x"] = FakeDevice()
    with pytest.raises(weft.InvalidArgumentError, match="'x' is device memory"):
        g.run_reference(v)


def test_malformed_json():
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT):
        weft.Graph.from_json("{ not json")
    doc = build_mlp().to_json().replace('"linear"', '"linearr"')
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "linearr"):
        weft.Graph.from_json(doc)


def test_bad_compile_arch():
    with _raises(weft.InvalidArgumentError, S.INVALID_ARGUMENT, "weft_graph_compile", "sm_12", "sm_90a"):
        build_mlp().compile("sm_12", disable_cache=True)


def test_closed_handles_raise_and_close_twice_is_safe():
    g = build_mlp()
    x = g.find("x")
    g.close()
    g.close()
    assert g.closed
    with _raises(weft.InvalidHandleError, S.INVALID_HANDLE, "closed"):
        g.silu(x)
    with weft.Context() as ctx:
        pass
    with _raises(weft.InvalidHandleError, S.INVALID_HANDLE):
        weft.Graph("g", context=ctx)


def test_weft_reports_dead_handles_itself():
    # Bypassing the bindings' closed check: the library's live-handle registry names the dead handle.
    g = weft.Graph("g")
    raw = ctypes.c_void_p(g._ptr.value)
    g.close()
    status = weft.lib().weft_graph_validate(raw)
    assert status == S.INVALID_HANDLE and "not a live graph" in _last_message()
    stats = weft._structs.ProgramStats.new()
    status = weft.lib().weft_program_get_stats(None, ctypes.byref(stats))
    assert status == S.INVALID_HANDLE and "weft_program_get_stats" in _last_message()


def test_foreign_tensor():
    a, b = weft.Graph("a"), weft.Graph("b")
    xa, xb = a.input("x", "f32", [4]), b.input("x", "f32", [4])
    with pytest.raises(weft.InvalidArgumentError, match="another graph"):
        a.add(xa, xb)


def test_status_classes_and_strings():
    assert weft.status_string(1) == "WEFT_ERROR_INVALID_ARGUMENT"
    assert weft.status_string(12345) == "WEFT_STATUS_UNKNOWN"
    assert issubclass(weft.InvalidArgumentError, ValueError)
    e = weft.errors.error_for(5, "nvrtc said no")
    assert isinstance(e, weft.CompileError) and e.status == S.COMPILE and e.message == "nvrtc said no"


def test_torch_tensor_of_unsupported_dtype(rng):
    g = build_mlp()
    v = {k: torch.from_numpy(a) for k, a in mlp_values(rng).items()}
    v["x"] = v["x"].double()
    with pytest.raises(weft.InvalidArgumentError, match="torch.float64 is not supported"):
        g.run_reference(v)
