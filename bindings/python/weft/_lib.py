"""Locates libweft and declares the C functions of include/weft/weft.h for ctypes.

The library is loaded on first use, not at import, so `import weft` works (and can print a clear error)
on a machine where libweft is not installed yet.
"""
import ctypes
import os
import threading

from . import _structs as S
from .errors import LibraryNotFoundError

# The header this binding was written against (weft.h WEFT_VERSION_MAJOR / MINOR).
HEADER_MAJOR, HEADER_MINOR = 0, 1

_lock = threading.Lock()
_lib = None

c_status = ctypes.c_int
c_enum = ctypes.c_int
c_tensor = ctypes.c_uint64
P = ctypes.POINTER
vp = ctypes.c_void_p
cp = ctypes.c_char_p
i32, i64, f32 = ctypes.c_int32, ctypes.c_int64, ctypes.c_float

# name: (restype, argtypes). Handles travel as void*; the library checks that they are live.
_SIGNATURES = {
    "weft_version": (ctypes.c_int, []),
    "weft_version_string": (cp, []),
    "weft_status_string": (cp, [c_enum]),
    "weft_last_error_message": (cp, []),
    "weft_dtype_name": (cp, [c_enum]),
    "weft_context_create": (c_status, [P(S.ContextOptions), P(vp)]),
    "weft_context_destroy": (None, [vp]),
    "weft_graph_create": (c_status, [vp, cp, P(vp)]),
    "weft_graph_destroy": (None, [vp]),
    "weft_graph_declare_symbol": (c_status, [vp, cp, i64, i64]),
    "weft_graph_set_symbol_policy": (c_status, [vp, cp, c_enum, P(i64), i32]),
    "weft_graph_add_tensor": (c_status, [vp, c_enum, cp, c_enum, P(S.Dim), i32, P(c_tensor)]),
    "weft_graph_add_op": (c_status, [vp, cp, P(c_tensor), i32, cp, cp, P(c_tensor)]),
    "weft_graph_mark_output": (c_status, [vp, c_tensor, cp]),
    "weft_graph_validate": (c_status, [vp]),
    "weft_op_embedding": (c_status, [vp, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_rmsnorm": (c_status, [vp, c_tensor, c_tensor, f32, cp, P(c_tensor)]),
    "weft_op_head_rmsnorm": (c_status, [vp, c_tensor, c_tensor, i64, f32, cp, P(c_tensor)]),
    "weft_op_layernorm": (c_status, [vp, c_tensor, c_tensor, c_tensor, f32, cp, P(c_tensor)]),
    "weft_op_linear": (c_status, [vp, c_tensor, c_tensor, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_matmul": (c_status, [vp, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_add": (c_status, [vp, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_mul": (c_status, [vp, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_silu": (c_status, [vp, c_tensor, cp, P(c_tensor)]),
    "weft_op_gelu": (c_status, [vp, c_tensor, ctypes.c_int, cp, P(c_tensor)]),
    "weft_op_silu_mul": (c_status, [vp, c_tensor, c_tensor, cp, P(c_tensor)]),
    "weft_op_rope": (c_status, [vp, c_tensor, c_tensor, P(S.RopeOptions), cp, P(c_tensor)]),
    "weft_op_attention_decode": (c_status, [vp, c_tensor, c_tensor, c_tensor, c_tensor, c_tensor, c_tensor,
                                            P(S.AttentionOptions), cp, P(c_tensor)]),
    "weft_op_softmax": (c_status, [vp, c_tensor, cp, P(c_tensor)]),
    "weft_op_argmax": (c_status, [vp, c_tensor, c_enum, cp, P(c_tensor)]),
    "weft_op_reduce": (c_status, [vp, c_tensor, c_enum, i32, ctypes.c_int, cp, P(c_tensor)]),
    "weft_op_cast": (c_status, [vp, c_tensor, c_enum, cp, P(c_tensor)]),
    "weft_op_reshape": (c_status, [vp, c_tensor, P(S.Dim), i32, cp, P(c_tensor)]),
    "weft_op_slice": (c_status, [vp, c_tensor, i32, i64, i64, cp, P(c_tensor)]),
    "weft_op_concat": (c_status, [vp, P(c_tensor), i32, i32, cp, P(c_tensor)]),
    "weft_op_count": (i32, []),
    "weft_op_name": (cp, [i32]),
    "weft_graph_tensor_info": (c_status, [vp, c_tensor, P(S.TensorInfo)]),
    "weft_graph_find_tensor": (c_status, [vp, cp, P(c_tensor)]),
    "weft_graph_num_outputs": (c_status, [vp, P(i32)]),
    "weft_graph_output": (c_status, [vp, i32, P(c_tensor)]),
    "weft_graph_to_json": (c_status, [vp, P(cp)]),
    "weft_graph_to_text": (c_status, [vp, P(cp)]),
    "weft_graph_hash": (c_status, [vp, P(ctypes.c_uint64)]),
    "weft_graph_from_json": (c_status, [vp, cp, P(vp)]),
    "weft_tensor_view_from_dlpack": (c_status, [vp, P(S.TensorView)]),
    "weft_graph_run_reference": (c_status, [vp, P(S.Binding), i32]),
    "weft_graph_compile": (c_status, [vp, P(S.CompileOptions), P(S.CompileReport)]),
    "weft_device_count": (c_status, [P(i32)]),
    "weft_program_create": (c_status, [vp, P(S.ProgramOptions), P(vp)]),
    "weft_program_destroy": (None, [vp]),
    "weft_program_run": (c_status, [vp, P(S.Binding), i32, vp]),
    "weft_program_get_stats": (c_status, [vp, P(S.ProgramStats)]),
    "weft_program_synchronize": (c_status, [vp, vp]),
    "weft_model_load": (c_status, [vp, cp, P(S.ModelOptions), P(vp)]),
    "weft_model_destroy": (None, [vp]),
    "weft_model_get_info": (c_status, [vp, P(S.ModelInfo)]),
    "weft_model_compile": (c_status, [vp, i32, P(S.CompileReport)]),
    "weft_model_generate": (c_status, [vp, P(S.GenerateRequest), P(S.GenerateReport)]),
}


def _candidates():
    """(description, path) pairs in the documented search order."""
    path = os.environ.get("WEFT_LIBRARY")
    if path:
        return [("WEFT_LIBRARY", path)]
    folder = os.environ.get("WEFT_LIB_DIR")
    if folder:
        return [("WEFT_LIB_DIR", os.path.join(folder, "libweft.so")),
                ("WEFT_LIB_DIR", os.path.join(folder, "libweft.so.0"))]
    return [("the system loader", "libweft.so.0"), ("the system loader", "libweft.so")]


def _load():
    tried = []
    for how, path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} (from {how}): {e}")
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        major, minor = lib.weft_version() // 10000, lib.weft_version() // 100 % 100
        # Option structs only grow within a major version, so an older minor would lack fields we set.
        if major != HEADER_MAJOR or minor < HEADER_MINOR:
            raise LibraryNotFoundError(
                f"{path} is weft {lib.weft_version_string().decode()}; this package needs weft "
                f"{HEADER_MAJOR}.{HEADER_MINOR} or a later {HEADER_MAJOR}.x")
        return lib
    raise LibraryNotFoundError(
        "libweft could not be loaded. Set WEFT_LIBRARY to the path of libweft.so, or WEFT_LIB_DIR to the "
        "folder holding it, or install it where the system loader finds it. Tried: " + "; ".join(tried))


def lib():
    """The loaded library (loaded on the first call; raises LibraryNotFoundError if it cannot be)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _load()
    return _lib


def is_available():
    """True if libweft can be loaded."""
    try:
        lib()
        return True
    except LibraryNotFoundError:
        return False


def check(status):
    """Raises the WeftError subclass for `status` with the calling thread's weft message (no-op on WEFT_OK)."""
    if status != 0:
        from .errors import error_for

        raise error_for(status, lib().weft_last_error_message().decode("utf-8", "replace"))


def invalid(message):
    """A Python-side argument error, raised as weft's INVALID_ARGUMENT so callers catch one kind."""
    from .errors import InvalidArgumentError, Status

    return InvalidArgumentError(Status.INVALID_ARGUMENT, message)
