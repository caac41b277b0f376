"""Library lookup, versions, the op table and handle lifetimes."""
import os
import subprocess
import sys

import pytest

import weft
from helpers import build_mlp


def _python(code, **env):
    full = dict(os.environ)
    for k in ("WEFT_LIBRARY", "WEFT_LIB_DIR"):
        full.pop(k, None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


def test_version():
    assert weft.version() == "0.1.0"
    assert weft.lib().weft_version() == 100


def test_every_op_of_the_table_has_a_helper():
    names = weft.op_names()
    assert len(names) >= 20
    for name in names:
        assert callable(getattr(weft.Graph, name)), name


def test_import_works_without_the_library_and_says_how_to_fix_it():
    r = _python("import weft\ntry:\n    weft.version()\nexcept weft.LibraryNotFoundError as e:\n"
                "    print('ERR', e)\nprint(weft.is_available())", WEFT_LIBRARY="/nonexistent/libweft.so")
    assert r.returncode == 0, r.stderr
    assert "ERR weft: libweft could not be loaded" in r.stdout and "WEFT_LIBRARY" in r.stdout
    assert "/nonexistent/libweft.so" in r.stdout and r.stdout.strip().endswith("False")


def test_lib_dir_lookup():
    folder = os.path.dirname(os.path.realpath(weft.lib()._name))
    r = _python("import weft; print(weft.version(), weft.lib()._name)", WEFT_LIB_DIR=folder)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0.1.0 " + folder)


def test_handles_close_deterministically():
    with build_mlp() as g:
        assert not g.closed
    assert g.closed
    g.close()  # twice is a no-op
    assert "closed" in repr(g)
    x = weft.Graph("h")
    x.__del__()  # the safety net and a later close both leave it closed exactly once
    x.close()
    assert x.closed


def test_graphs_are_independent_across_threads():
    import threading

    errors = []

    def work():
        try:
            for _ in range(20):
                with build_mlp() as g:
                    g.validate()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_dtype_spellings():
    import numpy as np
    import torch

    assert weft.dtypes.to_dtype("bfloat16") == weft.DType.BF16
    assert weft.dtypes.to_dtype(torch.float16) == weft.DType.F16
    assert weft.dtypes.to_dtype(np.float32) == weft.DType.F32
    assert weft.dtypes.to_dtype(np.dtype("int64")) == weft.DType.I64
    assert weft.dtypes.dtype_of(torch.float64) is None


def test_example_runs():
    example = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "mlp.py")
    r = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "y = linear(a, w2, b2) -> [batch, 32] f32  [output]" in r.stdout
    assert "reference: y [4, 32]" in r.stdout and "sm_90a megakernel:" in r.stdout
    assert "weft_runs=1" in r.stdout


def test_tensor_views_are_zero_copy_and_mark_dense_memory():
    import numpy as np
    import torch

    t = torch.arange(8, dtype=torch.float32).reshape(8, 1).t()  # [1, 8] with stride (1, 1): dense
    arg = weft.as_tensor_arg(t)
    assert arg.view.data == t.data_ptr() and arg.shape == (1, 8) and not arg.view.strides
    a = np.zeros((4, 6), np.float32)[:, ::2]
    arg = weft.as_tensor_arg(a)
    assert arg.view.data == a.ctypes.data and [arg.view.strides[k] for k in range(2)] == [6, 2]
    assert arg.dtype == weft.DType.F32 and arg.device == "cpu" and arg.writable
    with pytest.raises(weft.InvalidArgumentError, match="layout"):
        weft.as_tensor_arg(torch.eye(3).to_sparse())


def test_core_works_without_torch():
    # torch is optional: blocking its import must leave graphs and reference runs working.
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, weft\n"
            "g = weft.Graph('g'); x = g.input('x', 'f32', [3]); g.mark_output(g.silu(x), 'y')\n"
            "print(' '.join(f'{v:.4f}' for v in g.run_reference(x=np.ones(3, np.float32))['y']))\n")
    r = _python(code, WEFT_LIBRARY=weft.lib()._name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.7311"] * 3
