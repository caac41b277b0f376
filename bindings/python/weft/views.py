"""Zero-copy views of array objects as weft_tensor_view: torch tensors, numpy arrays, objects with
__cuda_array_interface__ or __dlpack__ (and __array_interface__, through numpy).

weft_tensor_view does not say whether its memory is on the host or a GPU, so every view here also records
its device: the reference interpreter must never be handed a device pointer, nor a program a host one.
"""
import ctypes
import sys

from . import _structs as S
from ._lib import check, invalid, lib
from .dtypes import DType, dtype_of

# DLPack device types (dlpack.h DLDeviceType) weft accepts, and where their memory lives.
_DL_DEVICES = {1: "cpu", 3: "cpu", 2: "cuda", 13: "cuda"}  # kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged
_CAI_TYPES = {"f2": DType.F16, "f4": DType.F32, "i4": DType.I32, "i8": DType.I64}

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class TensorArg:
    """One array as weft sees it. Holds references that keep the memory (and any DLPack capsule) alive
    for as long as the view is used."""

    __slots__ = ("view", "device", "device_index", "shape", "dtype", "writable", "source", "_keep")

    def __init__(self, data, dtype, shape, strides, device, device_index, writable, source, keep=()):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.device = device
        self.device_index = device_index
        self.writable = writable
        self.source = source
        if strides is not None and _dense(self.shape, strides):
            # NULL strides say "dense": weft's programs compare strides exactly, so a size-1 dim's arbitrary
            # stride (which torch and DLPack allow in contiguous tensors) would otherwise be refused.
            strides = None
        shape_arr = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        strides_arr = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
        self.view = S.TensorView(data, int(dtype), len(self.shape), shape_arr, strides_arr)
        self._keep = (shape_arr, strides_arr, source) + tuple(keep)


def _dense(shape, strides):
    """Row-major without gaps, ignoring the strides of size-1 dims (they never move)."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(list(strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _from_torch(t, what):
    dtype = dtype_of(t.dtype)
    if dtype is None:
        raise invalid(f"{what}: torch dtype {t.dtype} is not supported; expected bf16, f16, f32, i32 or i64")
    if t.layout is not sys.modules["torch"].strided:
        raise invalid(f"{what}: torch tensor has layout {t.layout}; expected a strided (dense) tensor")
    if t.device.type not in ("cpu", "cuda"):
        raise invalid(f"{what}: torch tensor on device '{t.device}'; expected a cpu or cuda tensor")
    return TensorArg(t.data_ptr(), dtype, t.shape, t.stride(), t.device.type, t.device.index,
                     True, t)


def _from_numpy(a, what):
    dtype = dtype_of(a.dtype)
    if dtype is None:
        raise invalid(f"{what}: numpy dtype {a.dtype} is not supported; expected bfloat16 (ml_dtypes), float16, "
                      f"float32, int32 or int64")
    if any(s % a.itemsize for s in a.strides):
        raise invalid(f"{what}: numpy strides {a.strides} are not multiples of the element size {a.itemsize}")
    return TensorArg(a.ctypes.data, dtype, a.shape, [s // a.itemsize for s in a.strides], "cpu", None,
                     bool(a.flags.writeable), a)


def _from_cai(obj, what):
    cai = obj.__cuda_array_interface__
    typestr = cai["typestr"]
    dtype = _CAI_TYPES.get(typestr[1:]) if typestr[0] in "<|=" else None
    if dtype is None:
        raise invalid(f"{what}: __cuda_array_interface__ typestr '{typestr}' is not supported; expected <f2, <f4, "
                      f"<i4 or <i8")
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    if strides is not None:
        if any(s % dtype.itemsize for s in strides):
            raise invalid(f"{what}: __cuda_array_interface__ strides {strides} are not multiples of the element "
                          f"size {dtype.itemsize}")
        strides = [s // dtype.itemsize for s in strides]
    return TensorArg(ptr, dtype, cai["shape"], strides, "cuda", None, not readonly, obj)


def _from_dlpack(obj, what, stream):
    device_type, device_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    device = _DL_DEVICES.get(int(device_type))
    if device == "cuda":
        # The producer makes `stream` wait for its pending work; DLPack spells the legacy default stream 1.
        capsule = obj.__dlpack__(stream=stream or 1)
    else:
        capsule = obj.__dlpack__()
    # The capsule is borrowed, not consumed: it is not renamed to "used_dltensor", so its own destructor
    # calls the producer's deleter once the TensorArg (which keeps the capsule) is gone.
    ptr = _capsule_get_pointer(capsule, b"dltensor")
    view = S.TensorView()
    check(lib().weft_tensor_view_from_dlpack(ctypes.c_void_p(ptr), ctypes.byref(view)))
    dl = S.DLTensor.from_address(ptr)
    device = _DL_DEVICES[dl.device.device_type]  # weft accepted it, so it is one of these
    shape = [view.shape[k] for k in range(view.rank)]
    strides = None if not view.strides else [view.strides[k] for k in range(view.rank)]
    return TensorArg(view.data, DType(view.dtype), shape, strides, device,
                     dl.device.device_id if device == "cuda" else None, True, obj, keep=(capsule,))


def device_of(obj):
    """("cpu" or "cuda", device index or None) of an array object without exporting it; ("cpu", None) for
    anything that is not recognizably device memory."""
    if isinstance(obj, TensorArg):
        return obj.device, obj.device_index
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return obj.device.type, obj.device.index
    if hasattr(obj, "__cuda_array_interface__"):
        return "cuda", None
    if hasattr(obj, "__dlpack_device__"):
        kind, index = obj.__dlpack_device__()
        if _DL_DEVICES.get(int(kind)) == "cuda":
            return "cuda", int(index)
    return "cpu", None


def as_tensor_arg(obj, what="tensor", stream=None):
    """A TensorArg viewing `obj` without copying. `what` names it in errors; `stream` is the CUDA stream the
    memory will be used on (handed to DLPack producers)."""
    if isinstance(obj, TensorArg):
        return obj
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, what)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return _from_numpy(obj, what)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, what)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, what, stream)
    if hasattr(obj, "__array_interface__"):
        import numpy

        return _from_numpy(numpy.asarray(obj), what)
    raise invalid(f"{what}: {type(obj).__name__} is not an array; expected a numpy array, a torch tensor, or an "
                  f"object with __dlpack__, __cuda_array_interface__ or __array_interface__")
