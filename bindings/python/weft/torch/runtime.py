"""A weft partition of an FX graph as an nn.Module: runs its weft graph on the CPU reference interpreter
(cpu tensors) or as a weft program on the current torch stream (cuda tensors), and falls back to the
partition's own eager code whenever weft cannot run it."""
import ctypes
import logging
import os

import torch

from .. import Graph, Program, Status, TensorKind, WeftError
from .. import _structs as S
from .._lib import check, lib
from ..dtypes import torch_dtype
from ..views import as_tensor_arg
from .lowering import Lowering
from .meta import Unsupported, fake_of
from .stats import stats

log = logging.getLogger("weft.torch")
# Device-side failures (an id out of range, the watchdog) surface only at weft_program_synchronize; runs
# stay asynchronous unless WEFT_TORCH_SYNC=1 asks to check after every run (debugging).
SYNCHRONIZE = os.environ.get("WEFT_TORCH_SYNC") == "1"


class WeftPartition(torch.nn.Module):
    """`eager` is the partition's FX GraphModule; `weights` names the top-level placeholders that are
    parameters or buffers (bound as WEIGHTs)."""

    def __init__(self, name, eager, weights=frozenset()):
        super().__init__()
        self.eager = eager
        self.name = name
        self._programs = {}  # device index -> Program
        self._off = set()  # device types weft failed on: those run eagerly from then on
        self._constants = {}  # device -> [(tensor id, torch tensor)]
        self._build(eager.graph, weights)
        stats.partitions += 1

    def _build(self, fx_graph, weights):
        self.graph = Graph(self.name)
        L = Lowering(self.graph)
        self._slots = []  # per forward argument: weft tensor id, or None for a non-tensor argument
        self._symbol_reads = {}  # symbol -> (argument index, dim) to read its value from
        arg_of = {}  # weft tensor id of an input -> its argument index
        for node in fx_graph.nodes:
            if node.op == "placeholder":
                if fake_of(node) is None:
                    self._slots.append(None)  # a SymInt or other scalar: weft reads sizes from the tensors
                    continue
                t = L.placeholder(node, TensorKind.WEIGHT if node.name in weights else TensorKind.INPUT)
                for k, d in enumerate(t.shape):
                    if isinstance(d, str):
                        self._symbol_reads.setdefault(d, (len(self._slots), k))
                arg_of[t.id] = len(self._slots)
                self._slots.append(t.id)
            elif node.op == "call_function":
                L.lower(node)
            elif node.op == "output":
                result = node.args[0]
        self._single = not isinstance(result, (tuple, list))
        self._plan = []  # per result: ("arg", index) for a passed-through input, else ("out", id, dtype, dims)
        marked = {}
        for node in [result] if self._single else list(result):
            if node not in L.env:
                raise Unsupported(f"result {node} is not a tensor of the partition")
            t = L.env[node]
            if t.id in arg_of:
                self._plan.append(("arg", arg_of[t.id]))
                continue
            if t.id not in marked:
                self.graph.mark_output(t)
                info = t.info()
                if any(isinstance(d, str) and d not in self._symbol_reads for d in info.shape):
                    raise Unsupported(f"result {node} has a size no input tensor shows")
                marked[t.id] = ("out", t.id, torch_dtype(info.dtype), info.shape)
            self._plan.append(marked[t.id])
        self._const_values = [(t.id, value) for t, value in L.constants]
        self.graph.validate()

    def extra_repr(self):
        return f"name={self.name!r}"

    # ---- running ----

    def forward(self, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device("cpu")
        mixed = any(t.device != device for t in tensors)
        # weft computes values only: with autograd recording, the eager code keeps gradients right.
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if needs_grad or mixed or device.type not in ("cpu", "cuda") or device.type in self._off:
            stats.eager_runs += 1
            return self.eager(*args)
        try:
            out = self._run(args, device)
        except WeftError as e:
            # Never crash a compiled model. Arguments weft refuses (a size outside a symbol's range) cost only
            # this call; anything else (an op the device cannot run) turns weft off for this device type.
            log.warning("weft partition %s falls back to eager on %s: %s", self.name, device.type, e)
            if e.status != Status.INVALID_ARGUMENT:
                self._off.add(device.type)
            stats.fallbacks += 1
            stats.eager_runs += 1
            return self.eager(*args)
        stats.weft_runs += 1
        return out

    def _constants_on(self, device):
        if device not in self._constants:
            self._constants[device] = [(tid, v.to(device)) for tid, v in self._const_values]
        return self._constants[device]

    def _run(self, args, device):
        cuda = device.type == "cuda"
        symbols = {s: args[i].shape[k] for s, (i, k) in self._symbol_reads.items()}
        keep = []
        pairs = []
        for tid, a in zip(self._slots, args):
            if tid is not None:
                # Programs read dense memory only; the reference interpreter takes any strides.
                pairs.append((tid, a.contiguous() if cuda else a))
        pairs += self._constants_on(device)
        outs = {}
        for entry in self._plan:
            if entry[0] == "out" and entry[1] not in outs:
                _, tid, dtype, dims = entry
                shape = [symbols[d] if isinstance(d, str) else d for d in dims]
                outs[tid] = torch.empty(shape, dtype=dtype, device=device)
                pairs.append((tid, outs[tid]))
        bindings = (S.Binding * len(pairs))()
        for k, (tid, t) in enumerate(pairs):
            view = as_tensor_arg(t)
            keep.append(view)
            bindings[k].tensor = tid
            bindings[k].value = view.view
        if cuda:
            program = self._programs.get(device.index)
            if program is None:
                index = torch.cuda.current_device() if device.index is None else device.index
                program = self._programs[device.index] = Program(self.graph, device=index)
            stream = torch.cuda.current_stream(device).cuda_stream
            check(lib().weft_program_run(program._h(), bindings, len(pairs), ctypes.c_void_p(stream)))
            if SYNCHRONIZE:
                program.synchronize(stream)
        else:
            check(lib().weft_graph_run_reference(self.graph._h(), bindings, len(pairs)))
        results = [args[e[1]].clone() if e[0] == "arg" else outs[e[1]] for e in self._plan]
        return results[0] if self._single else tuple(results)
