"""Splits a Dynamo FX graph into weft partitions and eager code.

A node is supported when lowering it alone into a scratch weft graph (operands as inputs with their recorded
dtypes and shapes) succeeds and weft infers the dtype and shape torch recorded. CapabilityBasedPartitioner
then groups supported nodes into partitions without cycles; each becomes a WeftPartition module, and every
other node stays as it was (eager).
"""
import logging

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .. import Graph, WeftError
from .lowering import HANDLERS, Lowering, is_compute
from .meta import Unsupported, fake_of
from .normalize import normalize
from .runtime import WeftPartition
from .stats import stats

log = logging.getLogger("weft.torch")
PREFIX = "weft_partition_"


class WeftSupport(OperatorSupportBase):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or node.target not in HANDLERS:
            return False
        if node not in self._cache:
            self._cache[node] = self._try(node)
        return self._cache[node]

    @staticmethod
    def _try(node):
        try:
            with Graph("probe") as g:
                L = Lowering(g)
                for inp in node.all_input_nodes:
                    if fake_of(inp) is not None:
                        L.placeholder(inp)
                L.lower(node)
            return True
        except (Unsupported, WeftError) as e:
            log.debug("eager: %s (%s)", node.format_node(), e)
            return False


def _parameter_names(gm, example_inputs):
    """Top-level placeholders bound to parameters or buffers: weft binds them as WEIGHTs."""
    names = set()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, example_inputs):
        if isinstance(value, torch.nn.Parameter) or "_parameters_" in node.name or "_buffers_" in node.name:
            names.add(node.name)
    return frozenset(names)


def partition(gm, example_inputs):
    """Rewrites `gm` in place: weft partitions become WeftPartition submodules. Returns gm."""
    normalize(gm)
    weights = _parameter_names(gm, example_inputs)
    partitioner = CapabilityBasedPartitioner(gm, WeftSupport(), allows_single_node_partition=True)
    # A partition that only reshapes or casts costs a weft run and saves nothing.
    proposed = [p for p in partitioner.propose_partitions() if any(is_compute(n) for n in p.nodes)]
    if not proposed:
        return gm
    fused = partitioner.fuse_partitions(proposed, prefix=PREFIX)
    for name, sub in list(fused.named_children()):
        if not name.startswith(PREFIX):
            continue
        try:
            module = WeftPartition(name, sub, weights)
        except (Unsupported, WeftError) as e:
            # Supported node by node but not together (rare): the partition stays eager, as a submodule.
            log.info("partition %s stays eager: %s", name, e)
            stats.rejected_partitions += 1
            continue
        setattr(fused, name, module)
    fused.recompile()
    return fused
