"""Turns {tensor or name: array} into a weft_binding array for one run, allocating outputs left out."""
import sys

from . import _structs as S
from ._lib import invalid
from .dtypes import numpy_dtype, torch_dtype
from .views import as_tensor_arg


class Run:
    """The C bindings of one run and the arrays behind them (kept alive until the run is done)."""

    def __init__(self, c_bindings, count, outputs, args):
        self.c_bindings = c_bindings
        self.count = count
        self.outputs = outputs
        self.args = args


def _key_name(graph, key):
    from .graph import Tensor

    if isinstance(key, Tensor):
        if key.graph is not graph:
            raise invalid("a binding key is a tensor of another graph; expected a tensor of this graph")
        return key.info().name
    if isinstance(key, str):
        return key
    raise invalid(f"a binding key is {type(key).__name__}; expected a weft.Tensor or a tensor name")


def _symbol_values(bound, args):
    """Symbol values read from the bound shapes; a symbol seen with two values is left out (weft then
    reports the mismatch with the tensors named)."""
    values, clash = {}, set()
    for _, info in bound:
        arg = args.get(info.name)
        if arg is None or len(arg.shape) != len(info.shape):
            continue
        for d, size in zip(info.shape, arg.shape):
            if isinstance(d, str):
                if values.setdefault(d, size) != size:
                    clash.add(d)
    for d in clash:
        del values[d]
    return values


def _allocate(name, dtype, shape, device, device_index, use_torch):
    if use_torch:
        import torch

        dev = torch.device(device, device_index) if device_index is not None else torch.device(device)
        return torch.empty(shape, dtype=torch_dtype(dtype), device=dev)
    if device != "cpu":
        raise invalid(f"output '{name}' is not bound and no torch tensor shows how to allocate device memory; "
                      f"pass an array for it")
    import numpy as np

    np_dtype = numpy_dtype(dtype)
    if np_dtype is None:
        raise invalid(f"output '{name}' is bf16, which numpy cannot hold without the ml_dtypes package; pass a "
                      f"torch tensor for it or install ml_dtypes")
    return np.empty(shape, dtype=np_dtype)


def prepare(graph, bindings, named, device, stream=None):
    """Checks and converts the bindings for a run on `device` ("cpu": the reference interpreter, "cuda": a
    program). Memory on the wrong side is refused here: a weft_tensor_view carries no device, so weft
    itself could not tell."""
    items = dict(bindings or {})
    items.update(named)
    args = {}
    for key, value in items.items():
        name = _key_name(graph, key)
        if name in args:
            raise invalid(f"tensor '{name}' is bound twice")
        arg = as_tensor_arg(value, f"binding '{name}'", stream)
        if arg.device != device:
            where = "host" if arg.device == "cpu" else "device"
            need = "host memory (the CPU reference interpreter)" if device == "cpu" else \
                "device memory (a GPU program)"
            raise invalid(f"binding '{name}' is {where} memory; this run needs {need}")
        args[name] = arg

    bound, outputs, _, ids = graph._io()
    for _, info in outputs + [b for b in bound if b[1].kind == 2]:  # outputs and STATE tensors are written
        arg = args.get(info.name)
        if arg is not None and not arg.writable:
            raise invalid(f"binding '{info.name}' is read-only; outputs and states are written")

    missing = [info for _, info in outputs if info.name not in args]
    if missing:
        torch = sys.modules.get("torch")
        use_torch = torch is not None and any(isinstance(a.source, torch.Tensor) for a in args.values())
        index = next((a.device_index for a in args.values() if a.device_index is not None), None)
        symbols = _symbol_values(bound, args)
        for info in missing:
            if any(isinstance(d, str) and d not in symbols for d in info.shape):
                continue  # not knowable from the bindings (or they disagree): weft names what is wrong
            shape = tuple(symbols[d] if isinstance(d, str) else d for d in info.shape)
            array = _allocate(info.name, info.dtype, shape, device, index, use_torch)
            args[info.name] = as_tensor_arg(array, f"output '{info.name}'", stream)

    c_bindings = (S.Binding * max(len(args), 1))()
    for k, (name, arg) in enumerate(args.items()):
        # An unknown name: find() raises weft's own message naming it.
        c_bindings[k].tensor = ids[name] if name in ids else graph.find(name).id
        c_bindings[k].value = arg.view
    result = {info.name: args[info.name].source for _, info in outputs if info.name in args}
    return Run(c_bindings, len(args), result, args)
