"""What Dynamo recorded about FX nodes: their example tensors (fake, with shapes that may hold SymInts)."""
import torch

# Upper bound given to a weft symbol made from an unbounded torch symbol: weft needs a finite range, and
# tensors sized at every symbol's maximum must stay under weft's 2^48-element limit. A larger value at
# run time is refused by weft, and that partition then runs in eager mode.
SYMBOL_MAX = 65536


class Unsupported(Exception):
    """A node (or a partition) weft cannot express; it stays in eager mode."""


def fake_of(node):
    """The example tensor Dynamo recorded for `node`, or None if it is not a tensor node."""
    if not isinstance(node, torch.fx.Node):
        return None
    val = node.meta.get("val", node.meta.get("example_value"))
    return val if isinstance(val, torch.Tensor) else None


def symbol_of(dim):
    """(name, min, max) for a SymInt that is one plain symbol; Unsupported for an expression (s0 * 4)."""
    expr = dim.node.expr
    if not getattr(expr, "is_Symbol", False):
        raise Unsupported(f"dim {expr} is an expression of symbols; weft dims are sizes or single symbols")
    lo, hi = 1, SYMBOL_MAX
    shape_env = getattr(dim.node, "shape_env", None)
    rng = getattr(shape_env, "var_to_range", {}).get(expr) if shape_env is not None else None
    if rng is not None:
        lo = max(1, _finite(rng.lower, lo))
        hi = min(SYMBOL_MAX, _finite(rng.upper, hi))
    if lo > hi:
        raise Unsupported(f"symbol {expr} has range [{lo}, {hi}] beyond weft's limit {SYMBOL_MAX}")
    return str(expr), lo, hi


def _finite(bound, default):
    """int(bound), or `default` for an infinite bound (sympy's oo and torch's int_oo raise different
    errors on int(), and int_oo even claims is_finite)."""
    try:
        return int(bound)
    except Exception:  # noqa: BLE001
        return default


def is_static(shape):
    return all(isinstance(d, int) for d in shape)
