"""Rewrites of a Dynamo FX graph into fewer, equivalent spellings before partitioning. Every rewrite keeps
the graph runnable in eager mode, so a node that ends up outside a weft partition still computes the same
thing.

- Method calls (x.view(...)) become calls of the same torch.Tensor function (torch.Tensor.view(x, ...)), so
  lowering and the partitioner deal with one kind of node.
- HF Llama's RMSNorm core, x * rsqrt(mean(x^2, -1, keepdim=True) + eps), becomes F.rms_norm(x, (D,), None,
  eps): weft has rmsnorm but neither rsqrt nor pow.
- a @ w.t() / a @ w.T / torch.matmul(a, w.transpose(0, 1)) with a 2-D w becomes F.linear(a, w): weft has no
  transpose, and linear reads its weight as [N, K].
- silu(g) * u and linear(x, w, b) + r (same shapes and dtypes) become fused.silu_mul / fused.linear_residual,
  which weft runs as one op each (SwiGLU, and the residual add in linear's epilogue).
"""
import operator

import torch
import torch.nn.functional as F

from . import fused
from .meta import fake_of


def methods_to_functions(gm):
    for node in gm.graph.nodes:
        if node.op == "call_method":
            fn = getattr(torch.Tensor, node.target, None)
            if callable(fn):
                node.op, node.target = "call_function", fn


def _arg(node, index, name, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _is(node, *targets):
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


_MUL = (operator.mul, torch.mul, torch.Tensor.mul)
_ADD = (operator.add, torch.add, torch.Tensor.add)
_MEAN = (torch.mean, torch.Tensor.mean)
_POW = (operator.pow, torch.pow, torch.Tensor.pow)
_RSQRT = (torch.rsqrt, torch.Tensor.rsqrt)
_MATMUL = (operator.matmul, torch.matmul, torch.Tensor.matmul, torch.mm, torch.Tensor.mm)
_TRANSPOSE = (torch.t, torch.Tensor.t, torch.transpose, torch.Tensor.transpose)


def _other(node, one):
    """The operand of a binary node that is not `one` (None if `one` is not an operand)."""
    a, b = node.args[0], node.args[1] if len(node.args) > 1 else None
    return b if a is one else a if b is one else None


def _squared_input(node):
    """x for pow(x, 2) or x * x, else None."""
    if _is(node, *_POW) and len(node.args) == 2 and node.args[1] == 2 and not node.kwargs:
        return node.args[0]
    if _is(node, *_MUL) and len(node.args) == 2 and node.args[0] is node.args[1] and not node.kwargs:
        return node.args[0]
    return None


def _last_dim_mean(node, rank):
    """x for mean(x, -1, keepdim=True) over the last dim only, else None."""
    if not _is(node, *_MEAN):
        return None
    dim, keepdim = _arg(node, 1, "dim"), _arg(node, 2, "keepdim", False)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if not keepdim or not isinstance(dim, int) or dim not in (-1, rank - 1) or _arg(node, 3, "dtype") is not None:
        return None
    return node.args[0]


def _rmsnorm_eps(rsqrt, x):
    """eps if `rsqrt` is rsqrt(mean(x^2, -1, keepdim=True) + eps), else None."""
    fx = fake_of(x)
    if fx is None or fx.dim() < 1 or not _is(rsqrt, *_RSQRT):
        return None
    add = rsqrt.args[0]
    if not _is(add, *_ADD) or add.kwargs or len(add.args) != 2:
        return None
    mean, eps = add.args
    if isinstance(mean, (int, float)):
        mean, eps = eps, mean
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        return None
    sq = _last_dim_mean(mean, fx.dim())
    if sq is None or _squared_input(sq) is not x:
        return None
    return float(eps)


def rewrite_rmsnorm(gm):
    for node in list(gm.graph.nodes):
        if not _is(node, *_MUL) or len(node.args) != 2 or node.kwargs:
            continue
        for x, r in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
            eps = _rmsnorm_eps(r, x) if isinstance(r, torch.fx.Node) else None
            fx = fake_of(x)
            if eps is None or not isinstance(fx.shape[-1], int):
                continue
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(F.rms_norm, (x, (int(fx.shape[-1]),), None, eps))
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            _erase_chain(gm.graph, [node, r, r.args[0]])
            break


def _erase_chain(graph, nodes):
    """Erases the pattern's nodes (and then their now-unused inputs) once nothing else uses them."""
    pending, erased = list(nodes), set()
    while pending:
        n = pending.pop(0)
        if isinstance(n, torch.fx.Node) and n not in erased and n.op == "call_function" and not n.users:
            inputs = list(n.all_input_nodes)
            graph.erase_node(n)
            erased.add(n)
            pending.extend(inputs)


def _transposed_matrix(node):
    """w for w.t(), w.T (Dynamo spells it t / permute), transpose(w, 0, 1) or transpose(w, -1, -2) of a 2-D
    w, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    src = node.args[0] if node.args else None
    fs = fake_of(src)
    if fs is None or fs.dim() != 2:
        return None
    if node.target in (torch.t, torch.Tensor.t):
        return src
    if node.target in (torch.transpose, torch.Tensor.transpose):
        dims = {d % 2 for d in node.args[1:3]} if len(node.args) == 3 else set()
        return src if dims == {0, 1} else None
    if node.target in (torch.permute, torch.Tensor.permute):
        dims = node.args[1:] if len(node.args) > 2 else node.args[1] if len(node.args) == 2 else None
        return src if dims is not None and [d % 2 for d in dims] == [1, 0] else None
    if node.target is getattr and node.args[1] in ("T", "mT"):
        return src
    return None


def rewrite_matmul_transpose(gm):
    for node in list(gm.graph.nodes):
        if not _is(node, *_MATMUL) or len(node.args) != 2 or node.kwargs:
            continue
        a, bt = node.args
        w = _transposed_matrix(bt)
        fa = fake_of(a)
        if w is None or fa is None or fa.dim() < 1:
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(F.linear, (a, w))
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        _erase_chain(gm.graph, [node, bt])


def _same_type(nodes, like):
    """Every node is a tensor with exactly `like`'s shape and dtype (the fused weft ops do not broadcast)."""
    fl = fake_of(like)
    for n in nodes:
        fn = fake_of(n)
        if fn is None or fl is None or fn.dtype != fl.dtype or tuple(fn.shape) != tuple(fl.shape):
            return False
    return True


def _fuse_binary(gm, binary_targets, producer_targets, build):
    """Replaces binary(p, other) / binary(other, p), with p a single-use producer, by build(p, other)."""
    for node in list(gm.graph.nodes):
        if not _is(node, *binary_targets) or len(node.args) != 2 or node.kwargs:
            continue
        for p, other in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
            if not _is(p, *producer_targets) or len(p.users) != 1 or not isinstance(other, torch.fx.Node):
                continue
            args = build(p, other, node)
            if args is None:
                continue
            target, fused_args = args
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(target, fused_args)
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            _erase_chain(gm.graph, [node, p])
            break


def _silu_mul(silu, up, node):
    gate = silu.args[0] if silu.args else None
    if _arg(silu, 1, "inplace", False) or not _same_type([gate, up], node):
        return None
    return fused.silu_mul, (gate, up)


def _linear_residual(linear, residual, node):
    x, w, b = _arg(linear, 0, "input"), _arg(linear, 1, "weight"), _arg(linear, 2, "bias")
    if not _same_type([linear, residual], node):
        return None
    return fused.linear_residual, (x, w, b, residual)


def normalize(gm):
    methods_to_functions(gm)
    rewrite_rmsnorm(gm)
    rewrite_matmul_transpose(gm)
    _fuse_binary(gm, _MUL, (F.silu,), _silu_mul)
    _fuse_binary(gm, _ADD, (F.linear,), _linear_residual)
    gm.graph.lint()
    gm.recompile()
