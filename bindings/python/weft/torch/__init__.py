"""torch.compile backend "weft": torch.compile(model, backend="weft").

Supported FX ops are grouped into partitions that run on weft (the CPU reference interpreter for cpu
tensors, a weft program on the current torch stream for cuda tensors); everything else, and any partition
weft cannot run, stays eager. Forward only: calls that record autograd run the eager code.
Importing this module registers the backend; the package's "torch_dynamo_backends" entry point lets torch
find it without the import.
"""
import logging

from .lowering import HANDLERS
from .partition import partition
from .stats import Stats, stats

log = logging.getLogger("weft.torch")


def backend(gm, example_inputs, **options):
    """The Dynamo backend: partitions `gm` and returns its forward. Never fails a compile: if weft's
    rewriting itself goes wrong, the graph runs as Dynamo captured it."""
    stats.graphs += 1
    try:
        return partition(gm, example_inputs).forward
    except Exception as e:  # noqa: BLE001 (an eager graph is always a correct answer)
        log.warning("weft backend: graph left eager after an error: %r", e, exc_info=True)
        return gm.forward


def _register():
    from torch._dynamo import list_backends, register_backend

    if "weft" not in list_backends(exclude_tags=()):
        register_backend(name="weft")(backend)


_register()

__all__ = ["HANDLERS", "Stats", "backend", "stats"]
