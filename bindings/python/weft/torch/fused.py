"""Composite ops that normalize() introduces for patterns weft runs as one op. Each is plain torch, so a
fused node that ends up outside a weft partition still runs eagerly with the original meaning."""
import torch.nn.functional as F


def silu_mul(gate, up):
    """SwiGLU's silu(gate) * up: weft's silu_mul (one pass, no rounded intermediate)."""
    return F.silu(gate) * up


def linear_residual(x, weight, bias, residual):
    """linear(x) + residual: weft's linear adds the residual in its epilogue."""
    return F.linear(x, weight, bias) + residual
