"""FX nodes (after normalize) -> weft ops. One handler per torch function family, registered in HANDLERS.

A handler reads its operands' and result's example tensors (node meta) and emits weft ops on a Lowering;
it raises Unsupported for any form it cannot express exactly. After each node the Lowering checks that the
weft result has the dtype and shape torch recorded, so a handler can never silently change semantics.
"""
import operator

import torch
import torch.nn.functional as F

from .. import TensorKind, WeftError
from ..dtypes import dtype_of
from . import fused
from .meta import Unsupported, fake_of, symbol_of

HANDLERS = {}
# Targets that only move or relabel data: a partition made only of these is not worth a weft run.
DATA_MOVEMENT = set()


def lowers(*targets, movement=False):
    def register(fn):
        for t in targets:
            HANDLERS[t] = fn
            if movement:
                DATA_MOVEMENT.add(t)
        return fn

    return register


def arg(node, index, name, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _only_kwargs(node, allowed):
    extra = set(node.kwargs) - set(allowed)
    if extra:
        raise Unsupported(f"{node.target}: keyword arguments {sorted(extra)}")


class Lowering:
    """Builds one weft graph from FX nodes. `constants` lists (weft tensor, torch value) pairs that a run
    binds as WEIGHTs: scalars of the FX graph, and the unit weight of an rms_norm without one."""

    def __init__(self, graph):
        self.g = graph
        self.env = {}
        self.constants = []
        self._symbols = set()

    # ---- shapes and dtypes ----

    def dims(self, shape):
        out = []
        for d in shape:
            if not isinstance(d, int) and getattr(d.node.expr, "is_number", False):
                d = int(d.node.expr)  # a SymInt that Dynamo already knows the value of
            if isinstance(d, int):
                if d < 1:
                    raise Unsupported(f"dim of size {d}; weft dims are >= 1")
                out.append(d)
            else:
                name, lo, hi = symbol_of(d)
                if name not in self._symbols:
                    self.g.declare_symbol(name, lo, hi)
                    self._symbols.add(name)
                out.append(name)
        return out

    @staticmethod
    def dtype(torch_dtype):
        d = dtype_of(torch_dtype)
        if d is None:
            raise Unsupported(f"dtype {torch_dtype}")
        return d

    # ---- operands ----

    def placeholder(self, node, kind=TensorKind.INPUT):
        fake = fake_of(node)
        if fake is None:
            raise Unsupported(f"{node.name} is not a tensor")
        t = self.g.add_tensor(kind, node.name, self.dtype(fake.dtype), self.dims(fake.shape))
        self.env[node] = t
        return t

    def tensor(self, value, dtype=None):
        """The weft tensor of an FX operand, cast to `dtype` (a torch dtype) if given."""
        if not isinstance(value, torch.fx.Node) or value not in self.env:
            raise Unsupported(f"operand {value!r} is not a tensor of this partition")
        t = self.env[value]
        if dtype is not None and fake_of(value).dtype != dtype:
            t = self.g.cast(t, self.dtype(dtype))
        return t

    def constant(self, value, torch_dtype, shape=()):
        """A WEIGHT holding `value` (a scalar, or a tensor of `shape`), bound on every run."""
        name = f"_weft_const{len(self.constants)}"
        t = self.g.add_tensor(TensorKind.WEIGHT, name, self.dtype(torch_dtype), list(shape))
        self.constants.append((t, torch.full(tuple(shape), value, dtype=torch_dtype)))
        return t

    # ---- nodes ----

    def lower(self, node):
        handler = HANDLERS.get(node.target) if node.op == "call_function" else None
        if handler is None:
            raise Unsupported(f"no weft lowering for {node.op} {node.target}")
        fake = fake_of(node)
        if fake is None:
            raise Unsupported(f"{node.name} does not produce one tensor")
        for inp in node.all_input_nodes:
            f = fake_of(inp)
            if f is not None and f.device != fake.device:
                # e.g. a cpu scalar tensor with cuda ones: one weft run sees one kind of memory
                raise Unsupported(f"{node.name} mixes devices {f.device} and {fake.device}")
        try:
            t = handler(self, node, fake)
            info = t.info()
            expected = (self.dtype(fake.dtype), tuple(self.dims(fake.shape)))
        except Unsupported:
            raise
        except WeftError as e:
            raise Unsupported(f"{node.name}: weft refused it: {e}") from e
        except Exception as e:  # noqa: BLE001 (an argument form no handler expected: the node stays eager)
            raise Unsupported(f"{node.name}: {type(e).__name__}: {e}") from e
        if (info.dtype, info.shape) != expected:
            raise Unsupported(f"{node.name}: weft gives {info.dtype.short} {list(info.shape)}, torch "
                              f"{expected[0].short} {list(expected[1])}")
        self.env[node] = t
        return t


def _reshape_to(L, t, fake):
    """t reshaped to the node's recorded shape (no op when it already has it)."""
    dims = L.dims(fake.shape)
    return t if tuple(t.shape) == tuple(dims) else L.g.reshape(t, dims)


# ---- matrix products ----

@lowers(F.linear)
def _linear(L, node, fake):
    _only_kwargs(node, ("input", "weight", "bias"))
    x, w, b = arg(node, 0, "input"), arg(node, 1, "weight"), arg(node, 2, "bias")
    return L.g.linear(L.tensor(x), L.tensor(w), None if b is None else L.tensor(b))


@lowers(fused.linear_residual)
def _linear_residual(L, node, fake):
    x, w, b, r = node.args
    return L.g.linear(L.tensor(x), L.tensor(w), None if b is None else L.tensor(b), L.tensor(r))


@lowers(operator.matmul, torch.matmul, torch.Tensor.matmul, torch.mm, torch.Tensor.mm, torch.bmm,
        torch.Tensor.bmm)
def _matmul(L, node, fake):
    _only_kwargs(node, ())
    a, b = node.args
    if fake_of(a).dim() < 2 or fake_of(b).dim() < 2:
        raise Unsupported("matmul of a vector")
    return L.g.matmul(L.tensor(a), L.tensor(b))


@lowers(torch.addmm, torch.Tensor.addmm)
def _addmm(L, node, fake):
    """bias + a @ b (GPT-2's Conv1D), only with beta = alpha = 1."""
    _only_kwargs(node, ("beta", "alpha"))
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 3:
        raise Unsupported("addmm with scaling")
    bias, a, b = node.args
    return L.g.add(L.g.matmul(L.tensor(a), L.tensor(b)), L.tensor(bias, fake.dtype))


# ---- elementwise ----

def _binary_operands(L, node, fake):
    """Both operands as weft tensors of the result's dtype; a Python number becomes a constant."""
    a, b = node.args[0], node.args[1]
    if not isinstance(a, torch.fx.Node) and not isinstance(b, torch.fx.Node):
        raise Unsupported("no tensor operand")

    def operand(v):
        if isinstance(v, torch.fx.Node):
            return L.tensor(v, fake.dtype)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unsupported(f"operand {v!r}")
        return L.constant(v, fake.dtype)

    return operand(a), operand(b)


def _scalar_op(L, node, fake, op, scalar):
    """x op scalar computed as torch does: in f32 for bf16/f16 tensors (the scalar is not rounded to the
    tensor's dtype first), then rounded once."""
    x = node.args[0] if isinstance(node.args[0], torch.fx.Node) else node.args[1]
    if fake.dtype in (torch.bfloat16, torch.float16):
        r = op(L.tensor(x, torch.float32), L.constant(scalar, torch.float32))
        return L.g.cast(r, L.dtype(fake.dtype))
    return op(L.tensor(x, fake.dtype), L.constant(scalar, fake.dtype))


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@lowers(operator.add, torch.add, torch.Tensor.add, operator.sub, torch.sub, torch.Tensor.sub)
def _add_sub(L, node, fake):
    _only_kwargs(node, ("alpha",))
    alpha = node.kwargs.get("alpha", 1)
    sub = node.target in (operator.sub, torch.sub, torch.Tensor.sub)
    a, b = node.args[0], node.args[1]
    if not _is_number(alpha):
        raise Unsupported("alpha")
    scale = -alpha if sub else alpha
    if _is_number(b) and isinstance(a, torch.fx.Node):
        return _scalar_op(L, node, fake, L.g.add, b * scale)
    if _is_number(a) and isinstance(b, torch.fx.Node):
        if scale != 1:
            raise Unsupported("number minus tensor")
        return _scalar_op(L, node, fake, L.g.add, a)
    ta, tb = _binary_operands(L, node, fake)
    if scale != 1:
        tb = L.g.mul(tb, L.constant(scale, fake.dtype))
    return L.g.add(ta, tb)


@lowers(operator.mul, torch.mul, torch.Tensor.mul)
def _mul(L, node, fake):
    _only_kwargs(node, ())
    a, b = node.args
    if _is_number(a) or _is_number(b):
        return _scalar_op(L, node, fake, L.g.mul, a if _is_number(a) else b)
    return L.g.mul(*_binary_operands(L, node, fake))


@lowers(operator.truediv, torch.div, torch.Tensor.div, torch.true_divide, torch.Tensor.true_divide)
def _div(L, node, fake):
    _only_kwargs(node, ("rounding_mode",) if node.kwargs.get("rounding_mode") is None else ())
    a, b = node.args
    if not isinstance(a, torch.fx.Node) or not _is_number(b) or b == 0:
        raise Unsupported("division by a tensor")  # weft has no reciprocal
    return _scalar_op(L, node, fake, L.g.mul, 1.0 / b)


@lowers(operator.neg, torch.neg, torch.Tensor.neg)
def _neg(L, node, fake):
    return L.g.mul(L.tensor(node.args[0], fake.dtype), L.constant(-1, fake.dtype))


@lowers(operator.pow, torch.pow, torch.Tensor.pow)
def _pow(L, node, fake):
    _only_kwargs(node, ())
    x, e = node.args
    if e != 2 or not isinstance(x, torch.fx.Node):
        raise Unsupported("pow other than x ** 2")
    t = L.tensor(x, fake.dtype)
    return L.g.mul(t, t)


@lowers(F.silu)
def _silu(L, node, fake):
    if arg(node, 1, "inplace", False):
        raise Unsupported("in-place silu")
    return L.g.silu(L.tensor(node.args[0]))


@lowers(fused.silu_mul)
def _silu_mul(L, node, fake):
    return L.g.silu_mul(L.tensor(node.args[0]), L.tensor(node.args[1]))


@lowers(F.gelu)
def _gelu(L, node, fake):
    _only_kwargs(node, ("approximate",))
    return L.g.gelu(L.tensor(node.args[0]), approximate=arg(node, 1, "approximate", "none"))


# ---- normalization, softmax, reductions ----

def _normalized_shape(node):
    shape = arg(node, 1, "normalized_shape")
    return (shape,) if isinstance(shape, int) else tuple(shape)


@lowers(F.rms_norm, torch.rms_norm)
def _rms_norm(L, node, fake):
    x, shape = arg(node, 0, "input"), _normalized_shape(node)
    w, eps = arg(node, 2, "weight"), arg(node, 3, "eps")
    fx = fake_of(x)
    if len(shape) != 1 or shape[0] != fx.shape[-1]:
        raise Unsupported("rms_norm over more than the last dim")
    eps = torch.finfo(fx.dtype).eps if eps is None else eps
    weight = L.constant(1.0, fx.dtype, (shape[0],)) if w is None else L.tensor(w, fx.dtype)
    return L.g.rmsnorm(L.tensor(x), weight, eps)


@lowers(F.layer_norm, torch.layer_norm)
def _layer_norm(L, node, fake):
    x, shape = arg(node, 0, "input"), _normalized_shape(node)
    w, b, eps = arg(node, 2, "weight"), arg(node, 3, "bias"), arg(node, 4, "eps", 1e-5)
    fx = fake_of(x)
    if len(shape) != 1 or shape[0] != fx.shape[-1]:
        raise Unsupported("layer_norm over more than the last dim")
    weight = L.constant(1.0, fx.dtype, (shape[0],)) if w is None else L.tensor(w, fx.dtype)
    return L.g.layernorm(L.tensor(x), weight, None if b is None else L.tensor(b, fx.dtype), eps)


@lowers(F.softmax, torch.softmax, torch.Tensor.softmax)
def _softmax(L, node, fake):
    x, dim = node.args[0], arg(node, 1, "dim")
    rank = fake_of(x).dim()
    if dim is None or rank < 1 or dim % rank != rank - 1:
        raise Unsupported("softmax over a dim other than the last")
    return L.g.softmax(L.tensor(x, fake.dtype))


def _reduce_dim(node, rank):
    dim = arg(node, 1, "dim")
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            raise Unsupported("reduction over several dims")
        dim = dim[0]
    if not isinstance(dim, int):
        raise Unsupported("reduction over every dim")
    return dim % rank


@lowers(torch.mean, torch.Tensor.mean, torch.sum, torch.Tensor.sum, torch.amax, torch.Tensor.amax)
def _reduce(L, node, fake):
    _only_kwargs(node, ("dim", "keepdim"))
    x = node.args[0]
    rank = fake_of(x).dim()
    if rank < 1 or len(node.args) > 3:
        raise Unsupported("reduction form")
    kind = {torch.mean: "mean", torch.Tensor.mean: "mean", torch.amax: "max", torch.Tensor.amax: "max"}.get(
        node.target, "sum")
    return L.g.reduce(L.tensor(x), kind, _reduce_dim(node, rank), bool(arg(node, 2, "keepdim", False)))


@lowers(torch.argmax, torch.Tensor.argmax)
def _argmax(L, node, fake):
    _only_kwargs(node, ("dim", "keepdim"))
    x = node.args[0]
    rank = fake_of(x).dim()
    if arg(node, 1, "dim") is None or rank < 1 or _reduce_dim(node, rank) != rank - 1:
        raise Unsupported("argmax over a dim other than the last")
    return _reshape_to(L, L.g.argmax(L.tensor(x), "i64"), fake)


@lowers(F.embedding)
def _embedding(L, node, fake):
    ids, table = arg(node, 0, "input"), arg(node, 1, "weight")
    if arg(node, 3, "max_norm") is not None:
        raise Unsupported("embedding with max_norm")  # it renormalizes the table in place
    return L.g.embedding(L.tensor(table), L.tensor(ids))


# ---- data movement ----

@lowers(torch.Tensor.view, torch.Tensor.reshape, torch.reshape, torch.Tensor.flatten, torch.flatten,
        torch.Tensor.unsqueeze, torch.unsqueeze, torch.Tensor.squeeze, torch.squeeze, torch.Tensor.view_as,
        torch.Tensor.reshape_as, movement=True)
def _reshape(L, node, fake):
    x = node.args[0]
    if node.target is torch.Tensor.view and len(node.args) == 2 and isinstance(node.args[1], torch.dtype):
        raise Unsupported("view as another dtype")
    if fake_of(x).dtype != fake.dtype:
        raise Unsupported("reshape that changes the dtype")
    return _reshape_to(L, L.tensor(x), fake)


@lowers(torch.Tensor.contiguous, torch.Tensor.clone, torch.clone, torch.Tensor.detach, torch.detach,
        F.dropout, torch.Tensor.to, torch.Tensor.type, torch.Tensor.type_as, torch.Tensor.float,
        torch.Tensor.half, torch.Tensor.bfloat16, torch.Tensor.int, torch.Tensor.long, movement=True)
def _same_or_cast(L, node, fake):
    """Ops whose result holds the input's values, perhaps in another dtype (dropout: only when it is off)."""
    x = node.args[0]
    if node.target is F.dropout and arg(node, 2, "training", True) and arg(node, 1, "p", 0.5) != 0:
        raise Unsupported("dropout in training mode")
    fx = fake_of(x)
    if fx is None or fx.device != fake.device:
        raise Unsupported("a move to another device")
    if tuple(fx.shape) != tuple(fake.shape):
        raise Unsupported("shape change")
    t = L.tensor(x)
    if fx.dtype == fake.dtype:
        if node.target in (torch.Tensor.clone, torch.clone):
            return L.g.reshape(t, L.dims(fake.shape))  # a real copy: clone's result must not alias
        return t
    return L.g.cast(t, L.dtype(fake.dtype))


@lowers(torch.cat, torch.concat, torch.concatenate, movement=True)
def _cat(L, node, fake):
    xs, dim = arg(node, 0, "tensors"), arg(node, 1, "dim", 0)
    if not isinstance(dim, int) or len(xs) == 0:
        raise Unsupported("cat form")
    ts = [L.tensor(x, fake.dtype) for x in xs]
    return ts[0] if len(ts) == 1 else L.g.concat(ts, dim % fake.dim())


def _index_parts(index, rank):
    """A getitem index as a list of slices / ints / None with Ellipsis (or the missing tail) expanded to full
    slices, so that every dim of the operand has one entry."""
    parts = list(index) if isinstance(index, tuple) else [index]
    for p in parts:
        if isinstance(p, bool) or not (p is None or p is Ellipsis or isinstance(p, (slice, int))):
            raise Unsupported(f"index {p!r}")
    if parts.count(Ellipsis) > 1:
        raise Unsupported("two ellipses")
    real = sum(1 for p in parts if p is not None and p is not Ellipsis)
    if real > rank:
        raise Unsupported("too many indices")
    fill = [slice(None)] * (rank - real)
    if Ellipsis in parts:
        k = parts.index(Ellipsis)
        return parts[:k] + fill + parts[k + 1:]
    return parts + fill


@lowers(operator.getitem, movement=True)
def _getitem(L, node, fake):
    x, index = node.args
    fx = fake_of(x)
    if fx is None:
        raise Unsupported("getitem of a non-tensor")
    t = L.tensor(x)
    axis = 0
    for p in _index_parts(index, fx.dim()):
        if p is None:
            continue  # a new size-1 dim: the final reshape adds it
        size = fx.shape[axis]
        if isinstance(p, int):
            if not isinstance(size, int):
                raise Unsupported("integer index into a symbolic dim")
            start = p % size if -size <= p < size else None
            if start is None:
                raise Unsupported("index out of range")
            if size != 1:
                t = L.g.slice(t, axis, start, start + 1)
        else:
            if p.step not in (None, 1) or not all(v is None or isinstance(v, int) for v in (p.start, p.stop)):
                raise Unsupported("strided or symbolic slice")
            if isinstance(size, int):
                start, stop, _ = p.indices(size)
                if stop <= start:
                    raise Unsupported("empty slice")
                if (start, stop) != (0, size):
                    t = L.g.slice(t, axis, start, stop)
            elif p.start not in (None, 0) or (p.stop is not None and p.stop < 2 ** 62):
                raise Unsupported("partial slice of a symbolic dim")
        axis += 1
    return _reshape_to(L, t, fake)


def is_compute(node):
    """Whether a node does arithmetic: the partitioner keeps only partitions with such a node."""
    return node.op == "call_function" and node.target in HANDLERS and node.target not in DATA_MOVEMENT


__all__ = ["HANDLERS", "Lowering", "Unsupported", "is_compute"]
