"""weft's errors: one exception class per weft_status, all subclasses of WeftError."""
import enum


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    OUT_OF_MEMORY = 3
    UNSUPPORTED = 4
    COMPILE = 5
    CUDA = 6
    CACHE = 7
    DEADLOCK = 8
    IO = 9
    INTERNAL = 10


class WeftError(Exception):
    """A failed weft call. `status` is the weft_status (a Status, or None when the library could not be
    loaded), `message` weft's own words (weft_last_error_message)."""

    def __init__(self, status, message):
        self.status = status
        self.message = message
        name = f"WEFT_ERROR_{status.name}" if isinstance(status, Status) else "weft"
        super().__init__(f"{name}: {message}")


class InvalidArgumentError(WeftError, ValueError):
    pass


class InvalidHandleError(WeftError):
    pass


class OutOfMemoryError(WeftError, MemoryError):
    pass


class UnsupportedError(WeftError):
    pass


class CompileError(WeftError):
    pass


class CudaError(WeftError):
    pass


class CacheError(WeftError):
    pass


class DeadlockError(WeftError):
    pass


class WeftIOError(WeftError):
    pass


class InternalError(WeftError):
    pass


class LibraryNotFoundError(WeftError):
    """libweft could not be loaded (see weft._lib for the search order)."""

    def __init__(self, message):
        super().__init__(None, message)


_BY_STATUS = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.INVALID_HANDLE: InvalidHandleError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.COMPILE: CompileError,
    Status.CUDA: CudaError,
    Status.CACHE: CacheError,
    Status.DEADLOCK: DeadlockError,
    Status.IO: WeftIOError,
    Status.INTERNAL: InternalError,
}


def error_for(status, message):
    """The WeftError subclass instance for a raw status code."""
    try:
        status = Status(status)
    except ValueError:
        return WeftError(status, message)
    return _BY_STATUS.get(status, WeftError)(status, message)
