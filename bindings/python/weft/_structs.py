"""ctypes mirrors of the structs in include/weft/weft.h (same field order and types; C enums are int)."""
import ctypes

_i32, _i64, _f64, _sz = ctypes.c_int32, ctypes.c_int64, ctypes.c_double, ctypes.c_size_t
_enum = ctypes.c_int
MAX_RANK = 8


class _Sized(ctypes.Structure):
    """A struct whose first field is struct_size; new() fills it in."""

    @classmethod
    def new(cls, **fields):
        s = cls(**fields)
        s.struct_size = ctypes.sizeof(cls)
        return s


class Dim(ctypes.Structure):
    _fields_ = [("symbol", ctypes.c_char_p), ("size", _i64)]


class ContextOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("reserved", _i32)]


class TensorInfo(_Sized):
    _fields_ = [("struct_size", _sz), ("name", ctypes.c_char_p), ("kind", _enum), ("dtype", _enum),
                ("rank", _i32), ("dims", Dim * MAX_RANK), ("is_output", _i32)]


class RopeOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("head_dim", _i64), ("theta", _f64), ("style", _enum), ("scaling", _enum),
                ("factor", _f64), ("low_freq_factor", _f64), ("high_freq_factor", _f64),
                ("original_max_position", _i64)]


class AttentionOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("num_q_heads", _i64), ("num_kv_heads", _i64), ("head_dim", _i64),
                ("scale", _f64)]


class TensorView(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", _enum), ("rank", _i32),
                ("shape", ctypes.POINTER(_i64)), ("strides", ctypes.POINTER(_i64))]


class Binding(ctypes.Structure):
    _fields_ = [("tensor", ctypes.c_uint64), ("value", TensorView)]


class CompileOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("arch", ctypes.c_char_p), ("num_sms", _i32), ("disable_cache", _i32)]


class CompileReport(_Sized):
    _fields_ = [("struct_size", _sz), ("num_tasks", _i64), ("num_events", _i64), ("num_queues", _i64),
                ("arena_bytes", _i64), ("cubin_bytes", _i64), ("total_ms", _f64), ("lower_ms", _f64),
                ("compile_ms", _f64), ("cache_hit", _i32), ("key", ctypes.c_char * 33)]


class ProgramOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("device_ordinal", _i32), ("arch", ctypes.c_char_p), ("watchdog_ms", _i32),
                ("disable_cache", _i32), ("max_loaded_kernels", _i32), ("lazy", _i32)]


class ProgramStats(_Sized):
    _fields_ = [("struct_size", _sz), ("compiles", _i64), ("cache_loads", _i64), ("evictions", _i64),
                ("generic_runs", _i64), ("pending", _i64), ("loaded", _i64), ("host_jit", _i32),
                ("host_jit_cache_hit", _i32), ("host_jit_ms", _f64)]


class ModelOptions(_Sized):
    _fields_ = [("struct_size", _sz), ("backend", _enum), ("device_ordinal", _i32), ("max_batch", _i32),
                ("max_seq", _i32), ("watchdog_ms", _i32), ("disable_cache", _i32)]


class ModelInfo(_Sized):
    _fields_ = [("struct_size", _sz), ("model_type", ctypes.c_char * 16), ("layers", _i32), ("hidden", _i32),
                ("q_heads", _i32), ("kv_heads", _i32), ("head_dim", _i32), ("ffn", _i32), ("vocab", _i32),
                ("max_batch", _i32), ("max_seq", _i32), ("backend", _enum), ("device", ctypes.c_char * 128),
                ("weight_bytes", _i64)]


# weft_generate_request.on_step: int32_t (*)(void* user, int32_t step, const int32_t* tokens, int32_t batch).
StepCallback = ctypes.CFUNCTYPE(_i32, ctypes.c_void_p, _i32, ctypes.POINTER(_i32), _i32)


class GenerateRequest(_Sized):
    _fields_ = [("struct_size", _sz), ("batch", _i32), ("prompt_len", _i32), ("steps", _i32),
                ("prompt_ids", ctypes.POINTER(_i32)), ("forced_ids", ctypes.POINTER(_i32)), ("multi_step", _i32),
                ("out_tokens", ctypes.POINTER(_i32)), ("out_logits", ctypes.POINTER(ctypes.c_float)),
                ("out_step_ms", ctypes.POINTER(ctypes.c_float)), ("on_step", StepCallback),
                ("on_step_user", ctypes.c_void_p)]


class GenerateReport(_Sized):
    _fields_ = [("struct_size", _sz), ("prefill_ms", _f64), ("decode_ms", _f64), ("steps_done", _i32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", _i32), ("device_id", _i32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor, read only to learn the device of a DLPack capsule (weft's view drops it)."""
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", _i32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(_i64)), ("strides", ctypes.POINTER(_i64)), ("byte_offset", ctypes.c_uint64)]
