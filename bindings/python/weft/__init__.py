"""weft: build tensor graphs, run them on the CPU reference interpreter or as one persistent GPU megakernel.

A thin ctypes layer over libweft's C API (include/weft/weft.h). libweft is located on first use: the
WEFT_LIBRARY path, else libweft.so in WEFT_LIB_DIR, else the system loader (libweft.so.0).
The torch.compile backend lives in weft.torch (backend name "weft").
"""
from ._lib import is_available, lib
from .context import Context
from .dtypes import DType
from .errors import (CacheError, CompileError, CudaError, DeadlockError, InternalError, InvalidArgumentError,
                     InvalidHandleError, LibraryNotFoundError, OutOfMemoryError, Status, UnsupportedError,
                     WeftError, WeftIOError)
from .graph import Graph, SymbolPolicy, Tensor, TensorKind
from .model import Model
from .program import Program, cuda_unavailable_reason, device_count, stream_handle
from .reports import CompileReport, Generation, ModelInfo, ProgramStats, TensorInfo
from .views import TensorArg, as_tensor_arg

__version__ = "0.1.0"


def version():
    """The loaded library's version string ("0.1.0")."""
    return lib().weft_version_string().decode()


def op_names():
    """The names of every op in weft's op table (usable with Graph.op)."""
    return [lib().weft_op_name(i).decode() for i in range(lib().weft_op_count())]


def status_string(status):
    """weft_status_string: "WEFT_ERROR_INVALID_ARGUMENT" for 1, and so on."""
    return lib().weft_status_string(int(status)).decode()


__all__ = [
    "CacheError", "CompileError", "CompileReport", "Context", "CudaError", "DType", "DeadlockError", "Generation",
    "Graph", "InternalError", "InvalidArgumentError", "InvalidHandleError", "LibraryNotFoundError", "Model",
    "ModelInfo", "OutOfMemoryError", "Program", "ProgramStats", "Status", "SymbolPolicy", "Tensor", "TensorArg",
    "TensorInfo", "TensorKind", "UnsupportedError", "WeftError", "WeftIOError", "as_tensor_arg",
    "cuda_unavailable_reason", "device_count", "is_available", "op_names", "status_string", "stream_handle", "version",
]
