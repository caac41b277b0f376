"""weft_context: the root handle graphs and models are created in."""
import ctypes

from ._handle import Handle
from ._lib import check, lib


class Context(Handle):
    """A weft context. Graphs and models keep their context alive, so closing it early is safe."""

    _destroy_fn = "weft_context_destroy"
    _kind = "context"

    def __init__(self):
        out = ctypes.c_void_p()
        check(lib().weft_context_create(None, ctypes.byref(out)))
        super().__init__(out)
