"""weft_graph: building a tensor graph, inspecting and serializing it, running it on the CPU reference
interpreter and compiling it."""
import ctypes
import enum
import json

from . import _structs as S
from ._handle import Handle
from ._lib import check, invalid, lib
from .context import Context
from .dtypes import DType, to_dtype
from .reports import CompileReport, TensorInfo

NONE = 0  # WEFT_TENSOR_NONE


class TensorKind(enum.IntEnum):
    INPUT = 0
    WEIGHT = 1
    STATE = 2
    INTERMEDIATE = 3


class Tensor:
    """A tensor of one graph (weft_tensor id + the graph it belongs to). Ops on Graph take and return these."""

    __slots__ = ("graph", "id")

    def __init__(self, graph, tensor_id):
        self.graph = graph
        self.id = int(tensor_id)

    def info(self):
        return self.graph.tensor_info(self)

    @property
    def name(self):
        return self.info().name

    @property
    def dtype(self):
        return self.info().dtype

    @property
    def shape(self):
        return self.info().shape

    @property
    def kind(self):
        return self.info().kind

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash((id(self.graph), self.id))

    def __repr__(self):
        try:
            i = self.info()
            dims = ", ".join(str(d) for d in i.shape)
            return f"<weft.Tensor {i.name} [{dims}] {i.dtype.short} {i.kind.name.lower()}>"
        except Exception:  # a closed graph: still printable
            return f"<weft.Tensor id={self.id:#x}>"


def _dims(shape):
    """A ctypes weft_dim array from ints (fixed sizes) and strs (symbol names)."""
    shape = list(shape)
    arr = (S.Dim * max(len(shape), 1))()
    for k, d in enumerate(shape):
        if isinstance(d, str):
            arr[k].symbol, arr[k].size = d.encode(), 0
        elif isinstance(d, int) or hasattr(d, "__index__"):
            arr[k].symbol, arr[k].size = None, int(d)
        else:
            raise invalid(f"dim {k} is {d!r}; expected an int size or a symbol name")
    return arr, len(shape)


def _name(name):
    return None if name is None else name.encode()


class SymbolPolicy(enum.IntEnum):
    """How a program specializes its kernels for a symbol's values (weft_symbol_policy)."""

    AUTO = 0  # BUCKETS (powers of two) when the symbol is maskable, else EXACT
    EXACT = 1  # one kernel per value
    BUCKETS = 2  # one kernel per bucket; a value runs on the kernel of the first bucket >= it
    RUNTIME = 3  # one kernel (compiled at the maximum) for every value


_SYMBOL_POLICIES = {p.name.lower(): p.value for p in SymbolPolicy}
_REDUCE_KINDS = {"sum": 0, "max": 1, "mean": 2}
_ROPE_STYLES = {"half": 0, "interleaved": 1}
_ROPE_SCALINGS = {"none": 0, "linear": 1, "llama3": 2}


def _choice(value, table, what):
    if isinstance(value, str):
        if value not in table:
            raise invalid(f"{what} is '{value}'; expected one of {', '.join(table)}")
        return table[value]
    return int(value)


class Graph(Handle):
    """A weft graph. `context` may be left out: the graph then keeps a private one alive.

    Ops return Tensor objects; operands may be Tensors or tensor names, None for an absent optional one.
    """

    _destroy_fn = "weft_graph_destroy"
    _kind = "graph"

    def __init__(self, name=None, context=None, *, _ptr=None):
        if _ptr is None:
            own = context is None
            ctx = Context() if own else context
            out = ctypes.c_void_p()
            try:
                check(lib().weft_graph_create(ctx._h(), _name(name), ctypes.byref(out)))
            finally:
                if own:
                    ctx.close()  # the graph holds its own reference to the context
            _ptr = out
        super().__init__(_ptr)
        self._generation = 0  # bumped on every change, so cached JSON-derived facts are refreshed
        self._io_cache = None
        self._programs = {}  # device ordinal -> (generation, Program) for run() on device memory

    @classmethod
    def from_json(cls, text, context=None):
        """A graph from canonical JSON (as to_json writes it); validated by weft."""
        own = context is None
        ctx = Context() if own else context
        out = ctypes.c_void_p()
        try:
            check(lib().weft_graph_from_json(ctx._h(), text.encode() if isinstance(text, str) else text,
                                             ctypes.byref(out)))
        finally:
            if own:
                ctx.close()
        return cls(_ptr=out)

    # ---- building ----

    def _changed(self):
        self._generation += 1
        self._io_cache = None

    def _t(self, t, what="tensor"):
        """A weft_tensor id from a Tensor, a name, or None (absent)."""
        if t is None:
            return NONE
        if isinstance(t, Tensor):
            if t.graph is not self:
                # weft would say so too, but only if the other graph is still alive; say it here always.
                raise invalid(f"{what} belongs to another graph; expected a tensor of this graph")
            return t.id
        if isinstance(t, str):
            return self.find(t).id
        raise invalid(f"{what} is {type(t).__name__}; expected a weft.Tensor, a tensor name or None")

    def declare_symbol(self, name, min_value, max_value):
        """Declares the symbolic dim `name` with values in [min_value, max_value]."""
        check(lib().weft_graph_declare_symbol(self._h(), name.encode(), int(min_value), int(max_value)))
        self._changed()

    def set_symbol_policy(self, name, policy, buckets=None):
        """How programs specialize for symbol `name`: policy "auto", "exact", "buckets" or "runtime" (or a
        SymbolPolicy). For "buckets", `buckets` holds ascending upper bounds within the symbol's range (its
        maximum is added when missing); None means powers of two. Saved in the JSON; not part of the hash."""
        policy = _choice(policy, _SYMBOL_POLICIES, "policy")
        bounds = []
        for k, b in enumerate(() if buckets is None else buckets):
            if isinstance(b, bool) or not (isinstance(b, int) or hasattr(b, "__index__")):
                raise invalid(f"bucket {k} is {b!r}; expected an int")
            bounds.append(int(b))
        arr = (ctypes.c_int64 * len(bounds))(*bounds) if bounds else None
        check(lib().weft_graph_set_symbol_policy(self._h(), name.encode(), policy, arr, len(bounds)))
        self._changed()

    def add_tensor(self, kind, name, dtype, shape):
        """A tensor bound at each run: kind INPUT, WEIGHT or STATE; shape of ints and declared symbol names."""
        dims, rank = _dims(shape)
        out = ctypes.c_uint64()
        kind = _choice(kind, {k.name.lower(): k.value for k in TensorKind}, "kind")
        check(lib().weft_graph_add_tensor(self._h(), kind, name.encode(), to_dtype(dtype), dims, rank,
                                          ctypes.byref(out)))
        self._changed()
        return Tensor(self, out.value)

    def input(self, name, dtype, shape):
        return self.add_tensor(TensorKind.INPUT, name, dtype, shape)

    def weight(self, name, dtype, shape):
        return self.add_tensor(TensorKind.WEIGHT, name, dtype, shape)

    def state(self, name, dtype, shape):
        return self.add_tensor(TensorKind.STATE, name, dtype, shape)

    def op(self, op, inputs, attrs=None, name=None):
        """Any op of the table (weft.op_names()) by name, with attributes as a dict (or a JSON string)."""
        ids = (ctypes.c_uint64 * max(len(inputs), 1))(*[self._t(t, f"input {k}") for k, t in enumerate(inputs)])
        attrs_json = None if attrs is None else (attrs if isinstance(attrs, str) else json.dumps(attrs))
        out = ctypes.c_uint64()
        check(lib().weft_graph_add_op(self._h(), op.encode(), ids, len(inputs),
                                      None if attrs_json is None else attrs_json.encode(), _name(name),
                                      ctypes.byref(out)))
        self._changed()
        return Tensor(self, out.value)

    def _call(self, fn, *args, name=None):
        out = ctypes.c_uint64()
        check(getattr(lib(), fn)(self._h(), *args, _name(name), ctypes.byref(out)))
        self._changed()
        return Tensor(self, out.value)

    def embedding(self, table, ids, name=None):
        return self._call("weft_op_embedding", self._t(table, "table"), self._t(ids, "ids"), name=name)

    def rmsnorm(self, x, weight, eps=1e-6, name=None):
        return self._call("weft_op_rmsnorm", self._t(x, "x"), self._t(weight, "weight"), float(eps), name=name)

    def head_rmsnorm(self, x, weight, head_dim, eps=1e-6, name=None):
        return self._call("weft_op_head_rmsnorm", self._t(x, "x"), self._t(weight, "weight"), int(head_dim),
                          float(eps), name=name)

    def layernorm(self, x, weight, bias=None, eps=1e-5, name=None):
        return self._call("weft_op_layernorm", self._t(x, "x"), self._t(weight, "weight"), self._t(bias, "bias"),
                          float(eps), name=name)

    def linear(self, x, weight, bias=None, residual=None, name=None):
        """x·weightᵀ + bias + residual (weight is [N, K])."""
        return self._call("weft_op_linear", self._t(x, "x"), self._t(weight, "weight"), self._t(bias, "bias"),
                          self._t(residual, "residual"), name=name)

    def rmsnorm_linear(self, x, norm_weight, weight, bias=None, residual=None, eps=1e-6, name=None):
        """linear(rmsnorm(x)) as one op (weft's decode fusion; a weight row must suit the device's streamed GEMV)."""
        return self.op("rmsnorm_linear", [x, norm_weight, weight, bias, residual], {"eps": float(eps)}, name=name)

    def silu_mul_linear(self, gate_up, weight, bias=None, residual=None, name=None):
        """linear(silu(gate) * up) as one op, gate_up holding [gate | up] along its last dim."""
        return self.op("silu_mul_linear", [gate_up, weight, bias, residual], name=name)

    def linear_silu_mul(self, x, weight, norm_weight=None, eps=1e-6, name=None):
        """silu(x @ gate.T) * (x @ up.T) as one op, weight holding the gate's rows then the up's ([2F, K]); with
        norm_weight ([K]) x is rmsnorm-ed first, as rmsnorm_linear does."""
        if norm_weight is None:
            return self.op("linear_silu_mul", [x, weight], name=name)
        return self.op("linear_silu_mul", [x, weight, norm_weight], {"eps": float(eps)}, name=name)

    def matmul(self, a, b, name=None):
        return self._call("weft_op_matmul", self._t(a, "a"), self._t(b, "b"), name=name)

    def add(self, a, b, name=None):
        return self._call("weft_op_add", self._t(a, "a"), self._t(b, "b"), name=name)

    def mul(self, a, b, name=None):
        return self._call("weft_op_mul", self._t(a, "a"), self._t(b, "b"), name=name)

    def silu(self, x, name=None):
        return self._call("weft_op_silu", self._t(x, "x"), name=name)

    def gelu(self, x, approximate="none", name=None):
        """approximate: "none" (erf form) or "tanh"."""
        tanh = _choice(approximate, {"none": 0, "tanh": 1}, "approximate")
        return self._call("weft_op_gelu", self._t(x, "x"), tanh, name=name)

    def silu_mul(self, gate, up=None, name=None):
        """silu(gate) * up; with up None, gate holds [gate | up] along its last dim."""
        return self._call("weft_op_silu_mul", self._t(gate, "gate"), self._t(up, "up"), name=name)

    def rope(self, x, positions, head_dim, theta=0.0, style="half", scaling="none", factor=0.0,
             low_freq_factor=0.0, high_freq_factor=0.0, original_max_position=0, name=None):
        """Rotary embedding; zeros take weft's defaults (theta 10000, llama3 factors 8 / 1 / 4 / 8192)."""
        o = S.RopeOptions.new(head_dim=int(head_dim), theta=float(theta),
                              style=_choice(style, _ROPE_STYLES, "style"),
                              scaling=_choice(scaling, _ROPE_SCALINGS, "scaling"), factor=float(factor),
                              low_freq_factor=float(low_freq_factor), high_freq_factor=float(high_freq_factor),
                              original_max_position=int(original_max_position))
        return self._call("weft_op_rope", self._t(x, "x"), self._t(positions, "positions"), ctypes.byref(o),
                          name=name)

    def attention_decode(self, q, k_new, v_new, k_cache, v_cache, positions, num_q_heads, num_kv_heads, head_dim,
                         scale=0.0, name=None):
        """One decode step of attention over KV caches (STATE tensors); scale 0 means 1/sqrt(head_dim)."""
        o = S.AttentionOptions.new(num_q_heads=int(num_q_heads), num_kv_heads=int(num_kv_heads),
                                   head_dim=int(head_dim), scale=float(scale))
        return self._call("weft_op_attention_decode", self._t(q, "q"), self._t(k_new, "k_new"),
                          self._t(v_new, "v_new"), self._t(k_cache, "k_cache"), self._t(v_cache, "v_cache"),
                          self._t(positions, "positions"), ctypes.byref(o), name=name)

    def attention_decode_qkv(self, qkv, k_cache, v_cache, positions, num_q_heads, num_kv_heads, head_dim,
                             q_norm_weight=None, k_norm_weight=None, scale=0.0, eps=1e-6, rope=None, rope_table=None,
                             name=None):
        """attention_decode fed by the packed q|k|v projection: the split, the optional q/k head norms and rope
        (``rope``: a dict of the rope op's attributes: theta, style, scaling, factor, ...) as one op. ``rope_table``:
        a rope_table op's output for the same positions, rotated by instead of cos / sin computed per task."""
        attrs = {"num_q_heads": int(num_q_heads), "num_kv_heads": int(num_kv_heads), "head_dim": int(head_dim),
                 "scale": float(scale), "eps": float(eps)}
        attrs.update(rope or {})
        return self.op("attention_decode_qkv",
                       [qkv, k_cache, v_cache, positions, q_norm_weight, k_norm_weight, rope_table], attrs, name=name)

    def rope_table(self, positions, head_dim, rope=None, name=None):
        """[..., head_dim] f32 per position: the cos of each rope pair, then its sin (``rope``: as for
        attention_decode_qkv), computed once for every attention_decode_qkv that rotates by them."""
        attrs = {"head_dim": int(head_dim)}
        attrs.update(rope or {})
        return self.op("rope_table", [positions], attrs, name=name)

    def softmax(self, x, name=None):
        return self._call("weft_op_softmax", self._t(x, "x"), name=name)

    def argmax(self, x, dtype="i64", name=None):
        return self._call("weft_op_argmax", self._t(x, "x"), to_dtype(dtype), name=name)

    def reduce(self, x, kind, axis=-1, keepdim=False, name=None):
        """kind: "sum", "max" or "mean" over one axis."""
        return self._call("weft_op_reduce", self._t(x, "x"), _choice(kind, _REDUCE_KINDS, "kind"), int(axis),
                          1 if keepdim else 0, name=name)

    def cast(self, x, dtype, name=None):
        return self._call("weft_op_cast", self._t(x, "x"), to_dtype(dtype), name=name)

    def reshape(self, x, shape, name=None):
        dims, rank = _dims(shape)
        return self._call("weft_op_reshape", self._t(x, "x"), dims, rank, name=name)

    def slice(self, x, axis, start, end, name=None):
        return self._call("weft_op_slice", self._t(x, "x"), int(axis), int(start), int(end), name=name)

    def concat(self, xs, axis=-1, name=None):
        ids = (ctypes.c_uint64 * max(len(xs), 1))(*[self._t(t, f"input {k}") for k, t in enumerate(xs)])
        return self._call("weft_op_concat", ids, len(xs), int(axis), name=name)

    def mark_output(self, tensor, name=None):
        """Marks `tensor` as a graph output (renamed to `name` if given). Returns the tensor."""
        tid = self._t(tensor, "tensor")
        check(lib().weft_graph_mark_output(self._h(), tid, _name(name)))
        self._changed()
        return Tensor(self, tid)

    # ---- inspecting ----

    def validate(self):
        check(lib().weft_graph_validate(self._h()))

    def find(self, name):
        """The tensor called `name`."""
        out = ctypes.c_uint64()
        check(lib().weft_graph_find_tensor(self._h(), name.encode(), ctypes.byref(out)))
        return Tensor(self, out.value)

    def tensor_info(self, tensor):
        info = S.TensorInfo.new()
        check(lib().weft_graph_tensor_info(self._h(), self._t(tensor), ctypes.byref(info)))
        shape = tuple(info.dims[k].symbol.decode() if info.dims[k].symbol else int(info.dims[k].size)
                      for k in range(info.rank))
        return TensorInfo(info.name.decode(), TensorKind(info.kind), DType(info.dtype), shape, bool(info.is_output))

    @property
    def outputs(self):
        """The output tensors in marking order."""
        n = ctypes.c_int32()
        check(lib().weft_graph_num_outputs(self._h(), ctypes.byref(n)))
        out = []
        for i in range(n.value):
            t = ctypes.c_uint64()
            check(lib().weft_graph_output(self._h(), i, ctypes.byref(t)))
            out.append(Tensor(self, t.value))
        return out

    def _io(self):
        """What a run binds, cached until the graph changes: (bound, outputs, symbols, ids) where bound and
        outputs are [(Tensor, TensorInfo)], symbols {name: (min, max)} and ids {name: tensor id}. Bound
        tensors come from the canonical JSON: the C API has no call that lists a graph's tensors."""
        if self._io_cache is None:
            doc = json.loads(self.to_json())
            bound = [self.find(t["name"]) for t in doc.get("tensors", [])]
            bound = [(t, self.tensor_info(t)) for t in bound]
            outputs = [(t, self.tensor_info(t)) for t in self.outputs]
            symbols = {s["name"]: (int(s["min"]), int(s["max"])) for s in doc.get("symbols", [])}
            ids = {info.name: t.id for t, info in bound + outputs}
            self._io_cache = (bound, outputs, symbols, ids)
        return self._io_cache

    @property
    def bound_tensors(self):
        """Every INPUT, WEIGHT and STATE tensor: what a run binds besides the outputs."""
        return [t for t, _ in self._io()[0]]

    @property
    def symbols(self):
        """{name: (min, max)} of the declared symbolic dims."""
        return dict(self._io()[2])

    def to_json(self):
        s = ctypes.c_char_p()
        check(lib().weft_graph_to_json(self._h(), ctypes.byref(s)))
        return s.value.decode()

    def text(self):
        """A readable listing of the graph."""
        s = ctypes.c_char_p()
        check(lib().weft_graph_to_text(self._h(), ctypes.byref(s)))
        return s.value.decode()

    def hash(self):
        """XXH3-128 of the graph's structure as an int (names left out)."""
        h = (ctypes.c_uint64 * 2)()
        check(lib().weft_graph_hash(self._h(), h))
        return (h[1] << 64) | h[0]

    def __repr__(self):
        return f"<weft.Graph {'closed' if self.closed else hex(self._ptr.value)}>"

    # ---- running and compiling ----

    def run_reference(self, bindings=None, **named):
        """Runs the graph on the CPU reference interpreter.

        `bindings` maps Tensors or names to host arrays (numpy arrays, cpu torch tensors, DLPack or
        __array_interface__ objects); keyword arguments add more by name. Outputs left out are allocated
        (torch if any binding is a torch tensor, else numpy). Returns {output name: array}.
        """
        from ._bind import prepare

        run = prepare(self, bindings, named, device="cpu")
        check(lib().weft_graph_run_reference(self._h(), run.c_bindings, run.count))
        return run.outputs

    def run(self, bindings=None, stream=None, **named):
        """Runs where the memory is: host arrays on the CPU reference interpreter, device arrays (torch CUDA
        tensors, __cuda_array_interface__ / CUDA DLPack objects) as a weft program, created on first use for
        that device and kept until the graph changes or closes. `stream` as for Program.run. Returns
        {output name: array}; a program run returns without waiting (see Program.synchronize)."""
        from .program import Program
        from .views import device_of

        where = [device_of(v) for v in list((bindings or {}).values()) + list(named.values())]
        if not where or any(kind != "cuda" for kind, _ in where):
            return self.run_reference(bindings, **named)  # device memory among host memory is refused there
        index = next((i for _, i in where if i is not None), -1)
        cached = self._programs.get(index)
        if cached is None or cached[0] != self._generation:
            if cached is not None:
                cached[1].close()
            cached = self._programs[index] = (self._generation, Program(self, device=index))
        return cached[1].run(bindings, stream=stream, **named)

    def close(self):
        for _, program in getattr(self, "_programs", {}).values():
            program.close()
        self._programs = {}
        super().close()

    def compile(self, arch="sm_90a", num_sms=0, disable_cache=False):
        """Compiles the megakernel for every symbol at its maximum, without a GPU (weft_graph_compile)."""
        opts = S.CompileOptions.new(arch=None if arch is None else arch.encode(), num_sms=int(num_sms),
                                    disable_cache=1 if disable_cache else 0)
        report = S.CompileReport.new()
        check(lib().weft_graph_compile(self._h(), ctypes.byref(opts), ctypes.byref(report)))
        return CompileReport._from_c(report)
