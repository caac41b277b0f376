# Running graphs: host bindings and the CPU reference, compiling, GPU programs, models.

element_count(shape) = foldl(*, shape; init=Int64(1))

function checked_shape(shape)
    s = Int64[Int64(d) for d in shape]
    any(<(0), s) && invalid("negative dim in shape $(Tuple(s))")
    return s
end

"""
    Bindings()

Host arrays bound to graph tensors for one reference run; `bind!` adds them. The arrays are used in place:
outputs and :state tensors are written into them.
"""
mutable struct Bindings
    tensors::Vector{UInt64}
    arrays::Vector{Any} # keeps each bound array alive while the Bindings is
    dtypes::Vector{Cint}
    shapes::Vector{Vector{Int64}}
end
Bindings() = Bindings(UInt64[], Any[], Cint[], Vector{Int64}[])

"""
    bind!(b::Bindings, t, A::Array)         # shape = reverse(size(A))
    bind!(b::Bindings, t, A::Array, shape)  # shape in weft's row-major order; length(A) == prod(shape)

Binds a dense Julia array. Julia is column-major and weft row-major, so a `(K, batch)` Matrix is the weft
tensor `[batch, K]` without a copy: that is the default shape.
"""
function bind!(b::Bindings, t::Tensor, A::Array{T}, shape=reverse(size(A))) where {T}
    s = checked_shape(shape)
    element_count(s) == length(A) ||
        invalid("binding of tensor $(repr(t.id)): shape $(Tuple(s)) holds $(element_count(s)) elements but the array has $(length(A))")
    push!(b.tensors, raw(t))
    push!(b.arrays, A)
    push!(b.dtypes, dtype_of(T))
    push!(b.shapes, s)
    return b
end

# weft_binding values pointing into `b`'s arrays and shapes: use them only while `b` is preserved.
function c_bindings(tensors, data_pointers, dtypes, shapes)
    return [L.weft_binding(tensors[i], L.weft_tensor_view(data_pointers[i], dtypes[i], Int32(length(shapes[i])),
                pointer(shapes[i]), C_NULL)) for i in eachindex(tensors)]
end

"""
    run_reference(g, b::Bindings)

Runs the CPU reference interpreter. Every input, weight, state and output tensor must be bound exactly once;
outputs and :state tensors are written in place (partly, on error).
"""
function run_reference(g::Graph, b::Bindings)
    GC.@preserve g b begin
        raw_bindings = c_bindings(b.tensors, [Ptr{Cvoid}(pointer(A)) for A in b.arrays], b.dtypes, b.shapes)
        check(L.weft_graph_run_reference(g.handle, raw_bindings, Int32(length(raw_bindings))))
    end
    return nothing
end

# A NUL-terminated char array of a C struct (the whole array if it holds no NUL).
function chars(t::NTuple{N,Cchar}) where {N}
    bytes = UInt8[c % UInt8 for c in t]
    n = something(findfirst(iszero, bytes), N + 1) - 1
    return String(bytes[1:n])
end

"""What a compilation did (weft_compile_report)."""
struct CompileReport
    num_tasks::Int64
    num_events::Int64
    num_queues::Int64
    arena_bytes::Int64
    cubin_bytes::Int64
    total_ms::Float64
    lower_ms::Float64
    compile_ms::Float64
    cache_hit::Bool
    key::String
end
CompileReport(r::L.weft_compile_report) = CompileReport(r.num_tasks, r.num_events, r.num_queues, r.arena_bytes,
    r.cubin_bytes, r.total_ms, r.lower_ms, r.compile_ms, r.cache_hit != 0, chars(r.key))

"""
    compile(g; arch=nothing, num_sms=0, disable_cache=false) -> CompileReport

Lowers the graph and compiles its megakernel cubin for every symbol at its maximum (no GPU needed). `arch` is
"sm_80", "sm_90a" or "sm_100a" (nothing: sm_90a).
"""
function compile(g::Graph; arch=nothing, num_sms::Integer=0, disable_cache::Bool=false)
    a = arch === nothing ? "" : cstr(arch, false)
    rep = Ref(L.weft_compile_report())
    GC.@preserve g a begin
        opts = Ref(L.weft_compile_options(sizeof(L.weft_compile_options), arch === nothing ? C_NULL : pointer(a),
            Int32(num_sms), Int32(disable_cache)))
        check(L.weft_graph_compile(g.handle, opts, rep))
    end
    return CompileReport(rep[])
end

"""Number of CUDA devices; throws WeftError(WEFT_ERROR_CUDA, why) without a driver or GPU."""
function device_count()
    n = Ref{Int32}(0)
    check(L.weft_device_count(n))
    return Int(n[])
end

"""A graph compiled and loaded on a GPU (weft_program); `close` waits for its launches and frees it."""
mutable struct Program
    handle::Ptr{L.weft_program}
    Program(h::Ptr{L.weft_program}) = finalizer(close, new(h))
end

"""
    Program(g; device_ordinal=-1, arch=nothing, watchdog_ms=0, disable_cache=false, max_loaded_kernels=0, lazy=false)

Loads `g` (copied) for a device: `device_ordinal >= 0` uses that device's primary context, -1 the calling
thread's current context (or device 0). Kernels are compiled per shape on first use (see `set_symbol_policy!`);
at most `max_loaded_kernels` stay loaded, the least recently used unloaded beyond it (0: 8). With `lazy`, a run
whose specialization is not loaded yet runs on the generic kernel (every maskable symbol at its maximum) while the
specialization compiles on a background thread, instead of waiting for the compile.
"""
function Program(g::Graph; device_ordinal::Integer=-1, arch=nothing, watchdog_ms::Integer=0, disable_cache::Bool=false,
    max_loaded_kernels::Integer=0, lazy::Bool=false)
    a = arch === nothing ? "" : cstr(arch, false)
    out = Ref{Ptr{L.weft_program}}(C_NULL)
    GC.@preserve g a begin
        opts = Ref(L.weft_program_options(sizeof(L.weft_program_options), Int32(device_ordinal),
            arch === nothing ? C_NULL : pointer(a), Int32(watchdog_ms), Int32(disable_cache), Int32(max_loaded_kernels),
            Int32(lazy)))
        check(L.weft_program_create(g.handle, opts, out))
    end
    return Program(out[])
end

function Base.close(p::Program)
    h, p.handle = p.handle, C_NULL
    h == C_NULL || L.weft_program_destroy(h)
    return nothing
end

"""
    program_stats(p) -> NamedTuple

What the program has done so far (weft_program_stats): `compiles` (kernel cache misses), `cache_loads`,
`evictions` (to stay within max_loaded_kernels), `generic_runs` (lazy runs served by the generic kernel),
`pending` (compiling in the background now), `loaded` (specializations loaded now), `host_jit` (runs are checked
and planned by JIT-compiled host code), `host_jit_cache_hit`, `host_jit_ms`. Finished background compiles are
taken in first.
"""
function program_stats(p::Program)
    s = with_out(L.weft_program_get_stats, p, L.weft_program_stats, L.weft_program_stats())
    return (compiles=Int(s.compiles), cache_loads=Int(s.cache_loads), evictions=Int(s.evictions),
        generic_runs=Int(s.generic_runs), pending=Int(s.pending), loaded=Int(s.loaded), host_jit=s.host_jit != 0,
        host_jit_cache_hit=s.host_jit_cache_hit != 0, host_jit_ms=Float64(s.host_jit_ms))
end

"""Device memory (CUdeviceptr addresses, dense layout) bound to graph tensors for a program run."""
mutable struct DeviceBindings
    tensors::Vector{UInt64}
    addresses::Vector{UInt64}
    dtypes::Vector{Cint}
    shapes::Vector{Vector{Int64}}
end
DeviceBindings() = DeviceBindings(UInt64[], UInt64[], Cint[], Vector{Int64}[])

"""    bind!(b::DeviceBindings, t, address::UInt64, dtype, shape)  — shape in weft's row-major order."""
function bind!(b::DeviceBindings, t::Tensor, address::UInt64, dtype, shape)
    push!(b.tensors, raw(t))
    push!(b.addresses, address)
    push!(b.dtypes, dtype_code(dtype))
    push!(b.shapes, checked_shape(shape))
    return b
end

"""
    run!(p, b::DeviceBindings; stream=C_NULL)

Launches one run on `stream` (a CUstream; C_NULL is the legacy default stream). Asynchronous: device-side
failures are reported by `synchronize`. The bound memory must stay valid until the run completes.
"""
function run!(p::Program, b::DeviceBindings; stream::Ptr{Cvoid}=C_NULL)
    GC.@preserve p b begin
        raw_bindings = c_bindings(b.tensors, [Ptr{Cvoid}(UInt(a)) for a in b.addresses], b.dtypes, b.shapes)
        check(L.weft_program_run(p.handle, raw_bindings, Int32(length(raw_bindings)), stream))
    end
    return nothing
end

"""Waits for `stream` and reports a device-side failure of an earlier run (the program stays usable)."""
function synchronize(p::Program; stream::Ptr{Cvoid}=C_NULL)
    GC.@preserve p check(L.weft_program_synchronize(p.handle, stream))
    return nothing
end

# ---- models ----

const BACKENDS = Dict(:auto => L.WEFT_BACKEND_AUTO, :gpu => L.WEFT_BACKEND_GPU, :reference => L.WEFT_BACKEND_REFERENCE)

"""A Hugging Face Llama / Qwen3 folder loaded for greedy generation (weft_model)."""
mutable struct Model
    handle::Ptr{L.weft_model}
    Model(h::Ptr{L.weft_model}) = finalizer(close, new(h))
end

"""    Model(ctx, dir; backend=:auto, device_ordinal=0, max_batch=0, max_seq=0, watchdog_ms=0, disable_cache=false)"""
function Model(ctx::Context, dir::AbstractString; backend::Symbol=:auto, device_ordinal::Integer=0,
    max_batch::Integer=0, max_seq::Integer=0, watchdog_ms::Integer=0, disable_cache::Bool=false)
    haskey(BACKENDS, backend) || invalid("unknown backend :$backend (expected :auto, :gpu or :reference)")
    opts = Ref(L.weft_model_options(sizeof(L.weft_model_options), BACKENDS[backend], Int32(device_ordinal),
        Int32(max_batch), Int32(max_seq), Int32(watchdog_ms), Int32(disable_cache)))
    out = Ref{Ptr{L.weft_model}}(C_NULL)
    GC.@preserve ctx check(L.weft_model_load(ctx.handle, cstr(dir, false), opts, out))
    return Model(out[])
end

function Base.close(m::Model)
    h, m.handle = m.handle, C_NULL
    h == C_NULL || L.weft_model_destroy(h)
    return nothing
end

function model_info(m::Model)
    i = with_out(L.weft_model_get_info, m, L.weft_model_info, L.weft_model_info())
    backend = something(findfirst(==(i.backend), BACKENDS), Symbol("backend", i.backend))
    return (model_type=chars(i.model_type), layers=Int(i.layers), hidden=Int(i.hidden), q_heads=Int(i.q_heads),
        kv_heads=Int(i.kv_heads), head_dim=Int(i.head_dim), ffn=Int(i.ffn), vocab=Int(i.vocab),
        max_batch=Int(i.max_batch), max_seq=Int(i.max_seq), backend=backend, device=chars(i.device),
        weight_bytes=Int(i.weight_bytes))
end

"""    compile(m::Model, batch) -> CompileReport  — the megakernel for `batch` rows, through the cache."""
compile(m::Model, batch::Integer) =
    CompileReport(with_out((h, out) -> L.weft_model_compile(h, Int32(batch), out), m, L.weft_compile_report,
        L.weft_compile_report()))

"""
    generate(m, prompts::Matrix{Int32}, steps; forced=nothing, multi_step=false, logits=false)

Greedy generation. `prompts` holds one prompt per column (prompt_len × batch, i.e. weft's [batch][prompt_len]);
`forced` (steps × batch) teacher-forces step j >= 2 with forced[j-1, b]. Returns (tokens = steps × batch,
logits = vocab × batch × steps or nothing, step_ms, prefill_ms, decode_ms).
"""
function generate(m::Model, prompts::Matrix{Int32}, steps::Integer; forced::Union{Nothing,Matrix{Int32}}=nothing,
    multi_step::Bool=false, logits::Bool=false)
    prompt_len, batch = size(prompts)
    forced === nothing || size(forced) == (steps, batch) ||
        invalid("forced is $(size(forced)); expected (steps, batch) = $((steps, batch))")
    steps >= 0 || invalid("steps $steps is negative")
    vocab = model_info(m).vocab
    tokens = zeros(Int32, steps, batch)
    step_ms = zeros(Float32, steps)
    out_logits = logits ? zeros(Float32, vocab, batch, steps) : nothing
    rep = Ref(L.weft_generate_report())
    GC.@preserve m prompts forced tokens step_ms out_logits begin
        req = Ref(L.weft_generate_request(sizeof(L.weft_generate_request), Int32(batch), Int32(prompt_len),
            Int32(steps), pointer(prompts), forced === nothing ? C_NULL : pointer(forced), Int32(multi_step),
            pointer(tokens), out_logits === nothing ? C_NULL : pointer(out_logits), pointer(step_ms), C_NULL, C_NULL))
        check(L.weft_model_generate(m.handle, req, rep))
    end
    return (tokens=tokens, logits=out_logits, step_ms=step_ms, prefill_ms=rep[].prefill_ms, decode_ms=rep[].decode_ms)
end
