# Raw declarations of weft's C API, one for one with include/weft/weft.h (version 0.1.0): C names, C layouts,
# one `ccall` per function. The Weft module on top of it is the API to use. bindings/julia/check.sh compares
# every name, arity, parameter type, struct field and enum value here with the header, so keep this file's
# shapes as they are: one wrapper per line, one field per line, one constant per line.
module LibWeft

# Replaced in Weft.__init__ by the library it finds (ccall accepts a non-constant library since Julia 1.6;
# the first call through each wrapper binds it, so set it before any call).
libweft = "libweft"
set_library!(path::AbstractString) = (global libweft = String(path); nothing)

const WEFT_VERSION_MAJOR = 0
const WEFT_VERSION_MINOR = 1
const WEFT_VERSION_PATCH = 0
const WEFT_VERSION = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH
const WEFT_MAX_RANK = 8

# C enums are int32 values: plain aliases, so an unknown value from a newer library is still representable.
const weft_status = Cint
const WEFT_OK = Cint(0)
const WEFT_ERROR_INVALID_ARGUMENT = Cint(1)
const WEFT_ERROR_INVALID_HANDLE = Cint(2)
const WEFT_ERROR_OUT_OF_MEMORY = Cint(3)
const WEFT_ERROR_UNSUPPORTED = Cint(4)
const WEFT_ERROR_COMPILE = Cint(5)
const WEFT_ERROR_CUDA = Cint(6)
const WEFT_ERROR_CACHE = Cint(7)
const WEFT_ERROR_DEADLOCK = Cint(8)
const WEFT_ERROR_IO = Cint(9)
const WEFT_ERROR_INTERNAL = Cint(10)

const weft_dtype = Cint
const WEFT_DTYPE_BF16 = Cint(0)
const WEFT_DTYPE_F16 = Cint(1)
const WEFT_DTYPE_F32 = Cint(2)
const WEFT_DTYPE_I32 = Cint(3)
const WEFT_DTYPE_I64 = Cint(4)

const weft_tensor_kind = Cint
const WEFT_TENSOR_INPUT = Cint(0)
const WEFT_TENSOR_WEIGHT = Cint(1)
const WEFT_TENSOR_STATE = Cint(2)
const WEFT_TENSOR_INTERMEDIATE = Cint(3)

const weft_rope_style = Cint
const WEFT_ROPE_HALF = Cint(0)
const WEFT_ROPE_INTERLEAVED = Cint(1)

const weft_rope_scaling = Cint
const WEFT_ROPE_SCALING_NONE = Cint(0)
const WEFT_ROPE_SCALING_LINEAR = Cint(1)
const WEFT_ROPE_SCALING_LLAMA3 = Cint(2)

const weft_reduce_kind = Cint
const WEFT_REDUCE_SUM = Cint(0)
const WEFT_REDUCE_MAX = Cint(1)
const WEFT_REDUCE_MEAN = Cint(2)

const weft_backend = Cint
const WEFT_BACKEND_AUTO = Cint(0)
const WEFT_BACKEND_GPU = Cint(1)
const WEFT_BACKEND_REFERENCE = Cint(2)

const weft_symbol_policy = Cint
const WEFT_SYMBOL_AUTO = Cint(0)
const WEFT_SYMBOL_EXACT = Cint(1)
const WEFT_SYMBOL_BUCKETS = Cint(2)
const WEFT_SYMBOL_RUNTIME = Cint(3)

const weft_tensor = UInt64
const WEFT_TENSOR_NONE = weft_tensor(0)

# Opaque handles: distinct types so a graph cannot be passed where a context is expected.
mutable struct weft_context end
mutable struct weft_graph end
mutable struct weft_program end
mutable struct weft_model end

struct weft_dim
    symbol::Ptr{Cchar}
    size::Int64
end

struct weft_context_options
    struct_size::Csize_t
    reserved::Int32
end

struct weft_rope_options
    struct_size::Csize_t
    head_dim::Int64
    theta::Cdouble
    style::weft_rope_style
    scaling::weft_rope_scaling
    factor::Cdouble
    low_freq_factor::Cdouble
    high_freq_factor::Cdouble
    original_max_position::Int64
end

struct weft_attention_options
    struct_size::Csize_t
    num_q_heads::Int64
    num_kv_heads::Int64
    head_dim::Int64
    scale::Cdouble
end

struct weft_tensor_info
    struct_size::Csize_t
    name::Ptr{Cchar}
    kind::weft_tensor_kind
    dtype::weft_dtype
    rank::Int32
    dims::NTuple{8,weft_dim}
    is_output::Int32
end

struct weft_tensor_view
    data::Ptr{Cvoid}
    dtype::weft_dtype
    rank::Int32
    shape::Ptr{Int64}
    strides::Ptr{Int64}
end

struct weft_binding
    tensor::weft_tensor
    value::weft_tensor_view
end

struct weft_compile_options
    struct_size::Csize_t
    arch::Ptr{Cchar}
    num_sms::Int32
    disable_cache::Int32
end

struct weft_compile_report
    struct_size::Csize_t
    num_tasks::Int64
    num_events::Int64
    num_queues::Int64
    arena_bytes::Int64
    cubin_bytes::Int64
    total_ms::Cdouble
    lower_ms::Cdouble
    compile_ms::Cdouble
    cache_hit::Int32
    key::NTuple{33,Cchar}
end

struct weft_program_options
    struct_size::Csize_t
    device_ordinal::Int32
    arch::Ptr{Cchar}
    watchdog_ms::Int32
    disable_cache::Int32
    max_loaded_kernels::Int32
    lazy::Int32
end

struct weft_program_stats
    struct_size::Csize_t
    compiles::Int64
    cache_loads::Int64
    evictions::Int64
    generic_runs::Int64
    pending::Int64
    loaded::Int64
    host_jit::Int32
    host_jit_cache_hit::Int32
    host_jit_ms::Cdouble
end

struct weft_model_options
    struct_size::Csize_t
    backend::weft_backend
    device_ordinal::Int32
    max_batch::Int32
    max_seq::Int32
    watchdog_ms::Int32
    disable_cache::Int32
end

struct weft_model_info
    struct_size::Csize_t
    model_type::NTuple{16,Cchar}
    layers::Int32
    hidden::Int32
    q_heads::Int32
    kv_heads::Int32
    head_dim::Int32
    ffn::Int32
    vocab::Int32
    max_batch::Int32
    max_seq::Int32
    backend::weft_backend
    device::NTuple{128,Cchar}
    weight_bytes::Int64
end

# int32_t (*)(void* on_step_user, int32_t step, const int32_t* tokens, int32_t batch): a @cfunction pointer.
const weft_step_fn = Ptr{Cvoid}

struct weft_generate_request
    struct_size::Csize_t
    batch::Int32
    prompt_len::Int32
    steps::Int32
    prompt_ids::Ptr{Int32}
    forced_ids::Ptr{Int32}
    multi_step::Int32
    out_tokens::Ptr{Int32}
    out_logits::Ptr{Cfloat}
    out_step_ms::Ptr{Cfloat}
    on_step::weft_step_fn
    on_step_user::Ptr{Cvoid}
end

struct weft_generate_report
    struct_size::Csize_t
    prefill_ms::Cdouble
    decode_ms::Cdouble
    steps_done::Int32
end

# Zero-filled values with struct_size set, for the structs weft fills in.
zero_chars(n) = ntuple(_ -> Cchar(0), n)
weft_tensor_info() = weft_tensor_info(sizeof(weft_tensor_info), C_NULL, 0, 0, 0, ntuple(_ -> weft_dim(C_NULL, 0), WEFT_MAX_RANK), 0)
weft_compile_report() = weft_compile_report(sizeof(weft_compile_report), 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0, zero_chars(33))
weft_model_info() = weft_model_info(sizeof(weft_model_info), zero_chars(16), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, zero_chars(128), 0)
weft_generate_report() = weft_generate_report(sizeof(weft_generate_report), 0.0, 0.0, 0)
weft_program_stats() = weft_program_stats(sizeof(weft_program_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0.0)

# ---- functions: one line each, parameters named as in weft.h ----
weft_version() = ccall((:weft_version, libweft), Cint, ())
weft_version_string() = ccall((:weft_version_string, libweft), Cstring, ())
weft_status_string(status) = ccall((:weft_status_string, libweft), Cstring, (weft_status,), status)
weft_last_error_message() = ccall((:weft_last_error_message, libweft), Cstring, ())
weft_dtype_name(dtype) = ccall((:weft_dtype_name, libweft), Cstring, (weft_dtype,), dtype)

weft_context_create(options, out) = ccall((:weft_context_create, libweft), weft_status, (Ptr{weft_context_options}, Ptr{Ptr{weft_context}}), options, out)
weft_context_destroy(context) = ccall((:weft_context_destroy, libweft), Cvoid, (Ptr{weft_context},), context)

weft_graph_create(context, name, out) = ccall((:weft_graph_create, libweft), weft_status, (Ptr{weft_context}, Cstring, Ptr{Ptr{weft_graph}}), context, name, out)
weft_graph_destroy(graph) = ccall((:weft_graph_destroy, libweft), Cvoid, (Ptr{weft_graph},), graph)
weft_graph_declare_symbol(graph, name, min_value, max_value) = ccall((:weft_graph_declare_symbol, libweft), weft_status, (Ptr{weft_graph}, Cstring, Int64, Int64), graph, name, min_value, max_value)
weft_graph_set_symbol_policy(graph, name, policy, buckets, num_buckets) = ccall((:weft_graph_set_symbol_policy, libweft), weft_status, (Ptr{weft_graph}, Cstring, weft_symbol_policy, Ptr{Int64}, Int32), graph, name, policy, buckets, num_buckets)
weft_graph_add_tensor(graph, kind, name, dtype, dims, rank, out) = ccall((:weft_graph_add_tensor, libweft), weft_status, (Ptr{weft_graph}, weft_tensor_kind, Cstring, weft_dtype, Ptr{weft_dim}, Int32, Ptr{weft_tensor}), graph, kind, name, dtype, dims, rank, out)
weft_graph_add_op(graph, op, inputs, num_inputs, attrs_json, name, out) = ccall((:weft_graph_add_op, libweft), weft_status, (Ptr{weft_graph}, Cstring, Ptr{weft_tensor}, Int32, Cstring, Cstring, Ptr{weft_tensor}), graph, op, inputs, num_inputs, attrs_json, name, out)
weft_graph_mark_output(graph, tensor, name) = ccall((:weft_graph_mark_output, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Cstring), graph, tensor, name)
weft_graph_validate(graph) = ccall((:weft_graph_validate, libweft), weft_status, (Ptr{weft_graph},), graph)

weft_op_embedding(g, table, ids, name, out) = ccall((:weft_op_embedding, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, table, ids, name, out)
weft_op_rmsnorm(g, x, weight, eps, name, out) = ccall((:weft_op_rmsnorm, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cfloat, Cstring, Ptr{weft_tensor}), g, x, weight, eps, name, out)
weft_op_head_rmsnorm(g, x, weight, head_dim, eps, name, out) = ccall((:weft_op_head_rmsnorm, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Int64, Cfloat, Cstring, Ptr{weft_tensor}), g, x, weight, head_dim, eps, name, out)
weft_op_layernorm(g, x, weight, bias, eps, name, out) = ccall((:weft_op_layernorm, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, weft_tensor, Cfloat, Cstring, Ptr{weft_tensor}), g, x, weight, bias, eps, name, out)
weft_op_linear(g, x, weight, bias, residual, name, out) = ccall((:weft_op_linear, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, x, weight, bias, residual, name, out)
weft_op_matmul(g, a, b, name, out) = ccall((:weft_op_matmul, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, a, b, name, out)
weft_op_add(g, a, b, name, out) = ccall((:weft_op_add, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, a, b, name, out)
weft_op_mul(g, a, b, name, out) = ccall((:weft_op_mul, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, a, b, name, out)
weft_op_silu(g, x, name, out) = ccall((:weft_op_silu, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Cstring, Ptr{weft_tensor}), g, x, name, out)
weft_op_gelu(g, x, tanh_approximation, name, out) = ccall((:weft_op_gelu, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Cint, Cstring, Ptr{weft_tensor}), g, x, tanh_approximation, name, out)
weft_op_silu_mul(g, gate, up, name, out) = ccall((:weft_op_silu_mul, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Cstring, Ptr{weft_tensor}), g, gate, up, name, out)
weft_op_rope(g, x, positions, options, name, out) = ccall((:weft_op_rope, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, Ptr{weft_rope_options}, Cstring, Ptr{weft_tensor}), g, x, positions, options, name, out)
weft_op_attention_decode(g, q, k_new, v_new, k_cache, v_cache, positions, options, name, out) = ccall((:weft_op_attention_decode, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_tensor, weft_tensor, weft_tensor, weft_tensor, weft_tensor, Ptr{weft_attention_options}, Cstring, Ptr{weft_tensor}), g, q, k_new, v_new, k_cache, v_cache, positions, options, name, out)
weft_op_softmax(g, x, name, out) = ccall((:weft_op_softmax, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Cstring, Ptr{weft_tensor}), g, x, name, out)
weft_op_argmax(g, x, dtype, name, out) = ccall((:weft_op_argmax, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_dtype, Cstring, Ptr{weft_tensor}), g, x, dtype, name, out)
weft_op_reduce(g, x, kind, axis, keepdim, name, out) = ccall((:weft_op_reduce, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_reduce_kind, Int32, Cint, Cstring, Ptr{weft_tensor}), g, x, kind, axis, keepdim, name, out)
weft_op_cast(g, x, dtype, name, out) = ccall((:weft_op_cast, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, weft_dtype, Cstring, Ptr{weft_tensor}), g, x, dtype, name, out)
weft_op_reshape(g, x, dims, rank, name, out) = ccall((:weft_op_reshape, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Ptr{weft_dim}, Int32, Cstring, Ptr{weft_tensor}), g, x, dims, rank, name, out)
weft_op_slice(g, x, axis, start, stop, name, out) = ccall((:weft_op_slice, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Int32, Int64, Int64, Cstring, Ptr{weft_tensor}), g, x, axis, start, stop, name, out)
weft_op_concat(g, inputs, num_inputs, axis, name, out) = ccall((:weft_op_concat, libweft), weft_status, (Ptr{weft_graph}, Ptr{weft_tensor}, Int32, Int32, Cstring, Ptr{weft_tensor}), g, inputs, num_inputs, axis, name, out)

weft_op_count() = ccall((:weft_op_count, libweft), Int32, ())
weft_op_name(index) = ccall((:weft_op_name, libweft), Cstring, (Int32,), index)
weft_graph_tensor_info(graph, tensor, info) = ccall((:weft_graph_tensor_info, libweft), weft_status, (Ptr{weft_graph}, weft_tensor, Ptr{weft_tensor_info}), graph, tensor, info)
weft_graph_find_tensor(graph, name, out) = ccall((:weft_graph_find_tensor, libweft), weft_status, (Ptr{weft_graph}, Cstring, Ptr{weft_tensor}), graph, name, out)
weft_graph_num_outputs(graph, out) = ccall((:weft_graph_num_outputs, libweft), weft_status, (Ptr{weft_graph}, Ptr{Int32}), graph, out)
weft_graph_output(graph, index, out) = ccall((:weft_graph_output, libweft), weft_status, (Ptr{weft_graph}, Int32, Ptr{weft_tensor}), graph, index, out)
weft_graph_to_json(graph, out_json) = ccall((:weft_graph_to_json, libweft), weft_status, (Ptr{weft_graph}, Ptr{Cstring}), graph, out_json)
weft_graph_to_text(graph, out_text) = ccall((:weft_graph_to_text, libweft), weft_status, (Ptr{weft_graph}, Ptr{Cstring}), graph, out_text)
weft_graph_hash(graph, out) = ccall((:weft_graph_hash, libweft), weft_status, (Ptr{weft_graph}, Ptr{UInt64}), graph, out)
weft_graph_from_json(context, json, out) = ccall((:weft_graph_from_json, libweft), weft_status, (Ptr{weft_context}, Cstring, Ptr{Ptr{weft_graph}}), context, json, out)

weft_tensor_view_from_dlpack(dltensor, out) = ccall((:weft_tensor_view_from_dlpack, libweft), weft_status, (Ptr{Cvoid}, Ptr{weft_tensor_view}), dltensor, out)
weft_graph_run_reference(graph, bindings, num_bindings) = ccall((:weft_graph_run_reference, libweft), weft_status, (Ptr{weft_graph}, Ptr{weft_binding}, Int32), graph, bindings, num_bindings)
weft_graph_compile(graph, options, report) = ccall((:weft_graph_compile, libweft), weft_status, (Ptr{weft_graph}, Ptr{weft_compile_options}, Ptr{weft_compile_report}), graph, options, report)

weft_device_count(out) = ccall((:weft_device_count, libweft), weft_status, (Ptr{Int32},), out)
weft_program_create(graph, options, out) = ccall((:weft_program_create, libweft), weft_status, (Ptr{weft_graph}, Ptr{weft_program_options}, Ptr{Ptr{weft_program}}), graph, options, out)
weft_program_destroy(program) = ccall((:weft_program_destroy, libweft), Cvoid, (Ptr{weft_program},), program)
weft_program_run(program, bindings, num_bindings, stream) = ccall((:weft_program_run, libweft), weft_status, (Ptr{weft_program}, Ptr{weft_binding}, Int32, Ptr{Cvoid}), program, bindings, num_bindings, stream)
weft_program_get_stats(program, out) = ccall((:weft_program_get_stats, libweft), weft_status, (Ptr{weft_program}, Ptr{weft_program_stats}), program, out)
weft_program_synchronize(program, stream) = ccall((:weft_program_synchronize, libweft), weft_status, (Ptr{weft_program}, Ptr{Cvoid}), program, stream)

weft_model_load(context, dir, options, out) = ccall((:weft_model_load, libweft), weft_status, (Ptr{weft_context}, Cstring, Ptr{weft_model_options}, Ptr{Ptr{weft_model}}), context, dir, options, out)
weft_model_destroy(model) = ccall((:weft_model_destroy, libweft), Cvoid, (Ptr{weft_model},), model)
weft_model_get_info(model, info) = ccall((:weft_model_get_info, libweft), weft_status, (Ptr{weft_model}, Ptr{weft_model_info}), model, info)
weft_model_compile(model, batch, report) = ccall((:weft_model_compile, libweft), weft_status, (Ptr{weft_model}, Int32, Ptr{weft_compile_report}), model, batch, report)
weft_model_generate(model, request, report) = ccall((:weft_model_generate, libweft), weft_status, (Ptr{weft_model}, Ptr{weft_generate_request}, Ptr{weft_generate_report}), model, request, report)

end # module LibWeft
