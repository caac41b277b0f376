"""
    Weft

Julia binding of weft, a JIT runtime that turns tensor graphs into one persistent GPU megakernel: a thin
layer over the C API (include/weft/weft.h). Handles (`Context`, `Graph`, `Program`, `Model`) are released by
`close`, with a finalizer as a safety net; every failure throws `WeftError(status, message)`.

The library is found through `ENV["WEFT_LIB"]` (a path to libweft.so), `ENV["WEFT_LIB_DIR"]` (its folder),
or the system's library path.

Shapes are given in weft's row-major order. A Julia array (column-major) binds without copying when its
`size` is the reverse of the tensor's shape; see `bind!`.
"""
module Weft

include("LibWeft.jl")
using .LibWeft
const L = LibWeft

export WeftError, Context, Graph, Program, Model, Bindings, DeviceBindings, BFloat16, Tensor
export declare_symbol!, set_symbol_policy!, add_tensor!, input!, weight!, state!, op!, embedding!, rmsnorm!, head_rmsnorm!,
    layernorm!, linear!, matmul!, silu!, gelu!, silu_mul!, rope!, attention_decode!, softmax!, argmax!,
    reduce!, cast!, reshape!, slice!, concat!, mark_output!, validate, tensor_info, find_tensor, outputs,
    to_json, to_text, structural_hash, graph_from_json, run_reference, compile, device_count, bind!, run!,
    synchronize, program_stats, model_info, generate, op_names

function __init__()
    path = get(ENV, "WEFT_LIB", "")
    if isempty(path) && haskey(ENV, "WEFT_LIB_DIR")
        path = joinpath(ENV["WEFT_LIB_DIR"], "libweft.so")
    end
    isempty(path) || L.set_library!(path)
end

# ---- errors ----

"""
    WeftError(status, message)

A failed weft call: `status` is the weft_status (an `Int32`, e.g. `LibWeft.WEFT_ERROR_INVALID_ARGUMENT`),
`message` weft's words for it (`weft_last_error_message`), or this binding's for arguments it rejects before
calling weft (always INVALID_ARGUMENT).
"""
struct WeftError <: Exception
    status::Int32
    message::String
end

status_name(s::Integer) = unsafe_string(L.weft_status_string(Cint(s)))
Base.showerror(io::IO, e::WeftError) = print(io, "WeftError: ", status_name(e.status), ": ", e.message)

invalid(msg) = throw(WeftError(L.WEFT_ERROR_INVALID_ARGUMENT, msg))

# The message is thread-local: read it right after the failed call, before anything can yield.
@inline function check(s::Cint)
    s == L.WEFT_OK && return nothing
    throw(WeftError(s, unsafe_string(L.weft_last_error_message())))
end

# A string for weft; "" or nothing gives NULL where `optional` (weft then picks a name).
function cstr(s, optional::Bool=true)
    s === nothing && return Cstring(C_NULL)
    s = string(s)
    optional && isempty(s) && return Cstring(C_NULL)
    occursin('\0', s) && invalid("string $(repr(s)) contains a NUL byte")
    return s
end

version() = Int(L.weft_version())
version_string() = unsafe_string(L.weft_version_string())
op_names() = [unsafe_string(L.weft_op_name(Int32(i))) for i in 0:L.weft_op_count()-1]

# ---- element types ----

"""bfloat16 as its bits; conversions round to nearest even, as weft's reference does."""
struct BFloat16
    bits::UInt16
end
function BFloat16(x::Float32)
    isnan(x) && return BFloat16(UInt16(reinterpret(UInt32, x) >> 16) | 0x0040)
    u = reinterpret(UInt32, x)
    return BFloat16(UInt16((u + 0x00007fff + ((u >> 16) & 0x00000001)) >> 16))
end
BFloat16(x::Real) = BFloat16(Float32(x))
Base.Float32(x::BFloat16) = reinterpret(Float32, UInt32(x.bits) << 16)
Base.convert(::Type{Float32}, x::BFloat16) = Float32(x)
Base.zero(::Type{BFloat16}) = BFloat16(0x0000)

dtype_of(::Type{BFloat16}) = L.WEFT_DTYPE_BF16
dtype_of(::Type{Float16}) = L.WEFT_DTYPE_F16
dtype_of(::Type{Float32}) = L.WEFT_DTYPE_F32
dtype_of(::Type{Int32}) = L.WEFT_DTYPE_I32
dtype_of(::Type{Int64}) = L.WEFT_DTYPE_I64
dtype_of(::Type{T}) where {T} = invalid("weft has no dtype for Julia's $T")

const DTYPES = Dict(:bf16 => BFloat16, :f16 => Float16, :f32 => Float32, :i32 => Int32, :i64 => Int64)
dtype_code(d::Symbol) = haskey(DTYPES, d) ? dtype_of(DTYPES[d]) : invalid("unknown dtype :$d")
dtype_code(::Type{T}) where {T} = dtype_of(T)

# ---- context ----

"""A weft context. Graphs keep their context alive, so it may be closed before them."""
mutable struct Context
    handle::Ptr{L.weft_context}
    function Context()
        out = Ref{Ptr{L.weft_context}}(C_NULL)
        check(L.weft_context_create(C_NULL, out))
        return finalizer(close, new(out[]))
    end
end

"""Releases the context; closing twice is a no-op."""
function Base.close(c::Context)
    h, c.handle = c.handle, C_NULL
    h == C_NULL || L.weft_context_destroy(h)
    return nothing
end

include("graph.jl")
include("run.jl")
include("cuda.jl")

end # module Weft
