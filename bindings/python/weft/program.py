"""weft_program: a graph compiled and loaded on a GPU, run on a CUDA stream."""
import ctypes
import sys

from . import _structs as S
from ._bind import prepare
from ._handle import Handle
from ._lib import check, invalid, lib
from .reports import ProgramStats


def device_count():
    """Number of CUDA devices weft can use; 0 without a driver or GPU (cuda_unavailable_reason says why)."""
    n = ctypes.c_int32()
    lib().weft_device_count(ctypes.byref(n))
    return n.value


def cuda_unavailable_reason():
    """None when weft sees a CUDA device, else weft's explanation (no driver, no device, ...)."""
    n = ctypes.c_int32()
    status = lib().weft_device_count(ctypes.byref(n))
    if status == 0 and n.value > 0:
        return None
    if status != 0:
        return lib().weft_last_error_message().decode("utf-8", "replace")
    return "weft_device_count found no CUDA device"


def stream_handle(stream):
    """A CUstream as an int from an int, a torch.cuda.Stream (.cuda_stream), a CuPy stream (.ptr) or None
    (the legacy default stream, 0)."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if isinstance(stream, int):
        return stream
    raise invalid(f"stream is {type(stream).__name__}; expected an int CUstream, a torch.cuda.Stream or None")


def _default_stream(values):
    """The current torch stream of the first torch CUDA tensor among the bindings, else the legacy default:
    work queued by torch on its current stream is then ordered before the weft launch."""
    torch = sys.modules.get("torch")
    if torch is not None:
        for v in values:
            if isinstance(v, torch.Tensor) and v.is_cuda:
                return torch.cuda.current_stream(v.device).cuda_stream
    return 0


class Program(Handle):
    """A graph loaded on a GPU (weft_program). The graph is copied, so it may change or close afterwards.

    device: a device ordinal, or -1 for the calling thread's current context (device 0 if none).
    max_loaded_kernels: specializations kept loaded on the device, the least recently used unloaded beyond it
    (0: weft's default, 8).
    lazy: a run whose specialization is not loaded yet runs on the generic kernel (every maskable symbol at its
    maximum) while the specialization compiles on a background thread, instead of waiting for the compile.
    """

    _destroy_fn = "weft_program_destroy"
    _kind = "program"

    def __init__(self, graph, device=-1, arch=None, watchdog_ms=0, disable_cache=False, max_loaded_kernels=0,
                 lazy=False):
        opts = S.ProgramOptions.new(device_ordinal=int(device), arch=None if arch is None else arch.encode(),
                                    watchdog_ms=int(watchdog_ms), disable_cache=1 if disable_cache else 0,
                                    max_loaded_kernels=int(max_loaded_kernels), lazy=1 if lazy else 0)
        out = ctypes.c_void_p()
        check(lib().weft_program_create(graph._h(), ctypes.byref(opts), ctypes.byref(out)))
        super().__init__(out)
        self._graph = graph  # binding names and output shapes come from it
        self._last_stream = 0

    def run(self, bindings=None, stream=None, **named):
        """Launches one run on `stream` (default: torch's current stream when a binding is a torch CUDA
        tensor, else the legacy default stream) and returns {output name: array} without waiting; outputs
        left out are allocated with torch. Device-side failures surface in synchronize()."""
        values = list((bindings or {}).values()) + list(named.values())
        handle = stream_handle(stream) if stream is not None else _default_stream(values)
        run = prepare(self._graph, bindings, named, device="cuda", stream=handle)
        check(lib().weft_program_run(self._h(), run.c_bindings, run.count, ctypes.c_void_p(handle)))
        self._last_stream = handle
        return run.outputs

    def synchronize(self, stream=None):
        """Waits for `stream` (default: the stream of the last run) and raises a device-side failure of an
        earlier run (DeadlockError from the watchdog, InvalidArgumentError for an id out of range)."""
        handle = self._last_stream if stream is None else stream_handle(stream)
        check(lib().weft_program_synchronize(self._h(), ctypes.c_void_p(handle)))

    def stats(self):
        """What the program has done so far (weft_program_get_stats) as a ProgramStats; background compiles
        that have finished are taken in first."""
        out = S.ProgramStats.new()
        check(lib().weft_program_get_stats(self._h(), ctypes.byref(out)))
        return ProgramStats._from_c(out)
