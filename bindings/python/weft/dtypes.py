"""weft's element types and their spellings in numpy, torch and DLPack."""
import enum
import sys


class DType(enum.IntEnum):
    BF16 = 0
    F16 = 1
    F32 = 2
    I32 = 3
    I64 = 4

    @property
    def short(self):
        """weft's own name: "bf16", "f32", ..."""
        return self.name.lower()

    @property
    def itemsize(self):
        return {DType.BF16: 2, DType.F16: 2, DType.F32: 4, DType.I32: 4, DType.I64: 8}[self]

    @property
    def is_float(self):
        return self in (DType.BF16, DType.F16, DType.F32)


_ALIASES = {
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "f16": DType.F16, "float16": DType.F16, "half": DType.F16,
    "f32": DType.F32, "float32": DType.F32, "float": DType.F32,
    "i32": DType.I32, "int32": DType.I32,
    "i64": DType.I64, "int64": DType.I64,
}


def dtype_of(value):
    """A DType from a DType, int, name ("bf16", "float32"), numpy dtype or torch dtype; None if not one
    weft knows."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return DType(value)
        except ValueError:
            return None
    if isinstance(value, str):
        return _ALIASES.get(value.lower())
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return _ALIASES.get(str(value).replace("torch.", ""))
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, type):
        try:
            value = np.dtype(value)  # np.float32 and friends are scalar types, not dtypes
        except TypeError:
            return None
    name = getattr(value, "name", None)  # numpy dtypes (ml_dtypes' bfloat16 is named "bfloat16")
    if isinstance(name, str):
        return _ALIASES.get(name)
    return None


def to_dtype(value):
    """dtype_of, raising weft's INVALID_ARGUMENT for anything weft does not know."""
    d = dtype_of(value)
    if d is None:
        from ._lib import invalid

        raise invalid(f"dtype {value!r} is not supported; expected bf16, f16, f32, i32 or i64")
    return d


def numpy_dtype(dtype):
    """The numpy dtype for a DType; bf16 needs the ml_dtypes package (numpy has no bfloat16)."""
    import numpy as np

    if dtype == DType.BF16:
        try:
            import ml_dtypes
        except ImportError:
            return None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({DType.F16: "float16", DType.F32: "float32", DType.I32: "int32", DType.I64: "int64"}[dtype])


def torch_dtype(dtype):
    import torch

    return {DType.BF16: torch.bfloat16, DType.F16: torch.float16, DType.F32: torch.float32,
            DType.I32: torch.int32, DType.I64: torch.int64}[dtype]
