"""Deterministic ownership of one weft handle: close() (or a with-block) frees it, __del__ is a safety net,
and freeing twice is harmless."""
import ctypes

from ._lib import lib
from .errors import InvalidHandleError, Status


class Handle:
    _destroy_fn = ""  # the weft_*_destroy function for this handle type
    _kind = "handle"

    def __init__(self, ptr):
        self._ptr = ctypes.c_void_p(ptr.value if isinstance(ptr, ctypes.c_void_p) else ptr)

    @property
    def closed(self):
        return not self._ptr.value

    def _h(self):
        """The raw pointer for a C call; a closed handle raises instead of passing a dead pointer (weft would
        report it, but the address might since have been reused by a new handle)."""
        if not self._ptr.value:
            raise InvalidHandleError(Status.INVALID_HANDLE, f"this {self._kind} is closed")
        return self._ptr

    def close(self):
        """Frees the handle now. Safe to call more than once."""
        ptr, self._ptr = self._ptr, ctypes.c_void_p()
        if ptr.value:
            getattr(lib(), self._destroy_fn)(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # At interpreter shutdown module globals may already be gone; leaking then is harmless.
        try:
            self.close()
        except Exception:
            pass
