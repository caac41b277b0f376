# Graphs: building, introspection, serialization.

"""A tensor id of one graph (weft rejects it, naming both graphs, when used with another)."""
struct Tensor
    id::UInt64
end
raw(t::Tensor) = t.id
raw(::Nothing) = L.WEFT_TENSOR_NONE

"""A weft graph. Modifying calls (the `!` functions) must not run while another task uses the graph; reading
calls (queries, `run_reference`, serialization) may run from several tasks at once."""
mutable struct Graph
    handle::Ptr{L.weft_graph}
    Graph(h::Ptr{L.weft_graph}) = finalizer(close, new(h))
end

"""    Graph(ctx, name="")  — an empty graph; `name` labels it in messages."""
function Graph(ctx::Context, name::AbstractString="")
    out = Ref{Ptr{L.weft_graph}}(C_NULL)
    GC.@preserve ctx check(L.weft_graph_create(ctx.handle, cstr(name), out))
    return Graph(out[])
end

"""    graph_from_json(ctx, json)  — reads canonical JSON (as `to_json` writes it) and validates the graph."""
function graph_from_json(ctx::Context, json::AbstractString)
    out = Ref{Ptr{L.weft_graph}}(C_NULL)
    GC.@preserve ctx check(L.weft_graph_from_json(ctx.handle, cstr(json, false), out))
    return Graph(out[])
end

"""Destroys the graph; closing twice is a no-op, and later calls on it throw INVALID_HANDLE."""
function Base.close(g::Graph)
    h, g.handle = g.handle, C_NULL
    h == C_NULL || L.weft_graph_destroy(h)
    return nothing
end

# Runs f(handle, out) for a call with one out-parameter, keeping the owner (and its handle) alive through it.
function with_out(f, owner, ::Type{T}, init) where {T}
    out = Ref{T}(init)
    GC.@preserve owner check(f(owner.handle, out))
    return out[]
end
tensor_op(f, g::Graph) = Tensor(with_out(f, g, L.weft_tensor, L.WEFT_TENSOR_NONE))

# Dims are integers (fixed sizes) or Symbols / Strings (declared symbols). Returns the C dims and the strings
# their pointers point into, which the caller keeps alive (GC.@preserve) through the call.
function c_dims(dims)
    names = String[]
    ds = L.weft_dim[]
    for d in dims
        if d isa Integer
            push!(ds, L.weft_dim(C_NULL, Int64(d)))
        elseif d isa Union{Symbol,AbstractString}
            s = cstr(string(d), false)
            push!(names, s)
            push!(ds, L.weft_dim(pointer(s), 0))
        else
            invalid("a dim is an integer or a symbol name, not $(repr(d))")
        end
    end
    return ds, names
end

"""    declare_symbol!(g, name, min, max)  — a symbolic dim taking values in [min, max]."""
function declare_symbol!(g::Graph, name, min_value::Integer, max_value::Integer)
    GC.@preserve g check(L.weft_graph_declare_symbol(g.handle, cstr(name, false), Int64(min_value), Int64(max_value)))
    return nothing
end

const SYMBOL_POLICIES = Dict(:auto => L.WEFT_SYMBOL_AUTO, :exact => L.WEFT_SYMBOL_EXACT,
    :buckets => L.WEFT_SYMBOL_BUCKETS, :runtime => L.WEFT_SYMBOL_RUNTIME)

"""    set_symbol_policy!(g, name, policy; buckets=())  — how programs specialize for symbol `name`: :auto (the
default: :buckets with powers of two when the symbol is maskable, else :exact), :exact (one kernel per value),
:buckets (one kernel per bucket; `buckets` are ascending upper bounds within the symbol's range, its maximum added
when missing; none means powers of two) or :runtime (one kernel, at the maximum, for every value). Saved in the
JSON; not part of the hash."""
function set_symbol_policy!(g::Graph, name, policy::Symbol; buckets=())
    haskey(SYMBOL_POLICIES, policy) ||
        invalid("unknown symbol policy :$policy (expected :auto, :exact, :buckets or :runtime)")
    b = Int64[Int64(x) for x in buckets]
    GC.@preserve g check(L.weft_graph_set_symbol_policy(g.handle, cstr(name, false), SYMBOL_POLICIES[policy], b,
        Int32(length(b))))
    return nothing
end

const KINDS = Dict(:input => L.WEFT_TENSOR_INPUT, :weight => L.WEFT_TENSOR_WEIGHT, :state => L.WEFT_TENSOR_STATE,
    :intermediate => L.WEFT_TENSOR_INTERMEDIATE)
kind_symbol(k) = something(findfirst(==(k), KINDS), Symbol("kind", k))

"""    add_tensor!(g, kind, name, dtype, dims)  — kind :input, :weight or :state; dtype a Julia element type
(`Float32`, `BFloat16`, `Float16`, `Int32`, `Int64`) or `:f32`-style Symbol; dims in weft's (row-major) order."""
function add_tensor!(g::Graph, kind::Symbol, name, dtype, dims)
    haskey(KINDS, kind) || invalid("unknown tensor kind :$kind (expected :input, :weight or :state)")
    ds, names = c_dims(dims)
    f(h, out) = L.weft_graph_add_tensor(h, KINDS[kind], cstr(name, false), dtype_code(dtype), ds, Int32(length(ds)), out)
    return GC.@preserve names tensor_op(f, g)
end
input!(g::Graph, name, dtype, dims) = add_tensor!(g, :input, name, dtype, dims)
weight!(g::Graph, name, dtype, dims) = add_tensor!(g, :weight, name, dtype, dims)
state!(g::Graph, name, dtype, dims) = add_tensor!(g, :state, name, dtype, dims)

"""    op!(g, op, inputs; attrs="", name="")  — any op of the table; `attrs` is a JSON object."""
function op!(g::Graph, op::AbstractString, inputs; attrs="", name="")
    ids = L.weft_tensor[raw(t) for t in inputs]
    tensor_op(g) do h, out
        L.weft_graph_add_op(h, cstr(op, false), ids, Int32(length(ids)), cstr(attrs), cstr(name), out)
    end
end

embedding!(g::Graph, table::Tensor, ids::Tensor; name="") =
    tensor_op((h, out) -> L.weft_op_embedding(h, raw(table), raw(ids), cstr(name), out), g)
rmsnorm!(g::Graph, x::Tensor, weight::Tensor; eps=1.0f-6, name="") =
    tensor_op((h, out) -> L.weft_op_rmsnorm(h, raw(x), raw(weight), Float32(eps), cstr(name), out), g)
head_rmsnorm!(g::Graph, x::Tensor, weight::Tensor, head_dim::Integer; eps=1.0f-6, name="") =
    tensor_op((h, out) -> L.weft_op_head_rmsnorm(h, raw(x), raw(weight), Int64(head_dim), Float32(eps), cstr(name), out), g)
layernorm!(g::Graph, x::Tensor, weight::Tensor; bias=nothing, eps=1.0f-5, name="") =
    tensor_op((h, out) -> L.weft_op_layernorm(h, raw(x), raw(weight), raw(bias), Float32(eps), cstr(name), out), g)
"""    linear!(g, x, weight; bias=nothing, residual=nothing, name="")  — x·weightᵀ + bias + residual."""
linear!(g::Graph, x::Tensor, weight::Tensor; bias=nothing, residual=nothing, name="") =
    tensor_op((h, out) -> L.weft_op_linear(h, raw(x), raw(weight), raw(bias), raw(residual), cstr(name), out), g)
matmul!(g::Graph, a::Tensor, b::Tensor; name="") =
    tensor_op((h, out) -> L.weft_op_matmul(h, raw(a), raw(b), cstr(name), out), g)
# add! and mul! are not exported: LinearAlgebra exports a mul! of its own.
add!(g::Graph, a::Tensor, b::Tensor; name="") = tensor_op((h, out) -> L.weft_op_add(h, raw(a), raw(b), cstr(name), out), g)
mul!(g::Graph, a::Tensor, b::Tensor; name="") = tensor_op((h, out) -> L.weft_op_mul(h, raw(a), raw(b), cstr(name), out), g)
silu!(g::Graph, x::Tensor; name="") = tensor_op((h, out) -> L.weft_op_silu(h, raw(x), cstr(name), out), g)
gelu!(g::Graph, x::Tensor; tanh_approximation::Bool=false, name="") =
    tensor_op((h, out) -> L.weft_op_gelu(h, raw(x), Cint(tanh_approximation), cstr(name), out), g)
"""    silu_mul!(g, gate, up=nothing; name="")  — silu(gate) * up; without `up`, gate holds [gate | up]."""
silu_mul!(g::Graph, gate::Tensor, up=nothing; name="") =
    tensor_op((h, out) -> L.weft_op_silu_mul(h, raw(gate), raw(up), cstr(name), out), g)

const ROPE_STYLES = Dict(:half => L.WEFT_ROPE_HALF, :interleaved => L.WEFT_ROPE_INTERLEAVED)
const ROPE_SCALINGS = Dict(:none => L.WEFT_ROPE_SCALING_NONE, :linear => L.WEFT_ROPE_SCALING_LINEAR,
    :llama3 => L.WEFT_ROPE_SCALING_LLAMA3)

"""    rope!(g, x, positions; head_dim, theta=0, style=:half, scaling=:none, factor=0, low_freq_factor=0,
high_freq_factor=0, original_max_position=0, name="")  — 0 takes weft's default."""
function rope!(g::Graph, x::Tensor, positions::Tensor; head_dim::Integer, theta=0.0, style::Symbol=:half,
    scaling::Symbol=:none, factor=0.0, low_freq_factor=0.0, high_freq_factor=0.0, original_max_position=0, name="")
    haskey(ROPE_STYLES, style) || invalid("unknown rope style :$style (expected :half or :interleaved)")
    haskey(ROPE_SCALINGS, scaling) || invalid("unknown rope scaling :$scaling (expected :none, :linear or :llama3)")
    o = Ref(L.weft_rope_options(sizeof(L.weft_rope_options), Int64(head_dim), Float64(theta), ROPE_STYLES[style],
        ROPE_SCALINGS[scaling], Float64(factor), Float64(low_freq_factor), Float64(high_freq_factor),
        Int64(original_max_position)))
    tensor_op((h, out) -> L.weft_op_rope(h, raw(x), raw(positions), o, cstr(name), out), g)
end

"""    attention_decode!(g, q, k_new, v_new, k_cache, v_cache, positions; num_q_heads, num_kv_heads, head_dim,
scale=0, name="")  — one decode step; writes k_new / v_new into the :state caches at `positions`."""
function attention_decode!(g::Graph, q::Tensor, k_new::Tensor, v_new::Tensor, k_cache::Tensor, v_cache::Tensor,
    positions::Tensor; num_q_heads::Integer, num_kv_heads::Integer, head_dim::Integer, scale=0.0, name="")
    o = Ref(L.weft_attention_options(sizeof(L.weft_attention_options), Int64(num_q_heads), Int64(num_kv_heads),
        Int64(head_dim), Float64(scale)))
    tensor_op(g) do h, out
        L.weft_op_attention_decode(h, raw(q), raw(k_new), raw(v_new), raw(k_cache), raw(v_cache), raw(positions), o,
            cstr(name), out)
    end
end

softmax!(g::Graph, x::Tensor; name="") = tensor_op((h, out) -> L.weft_op_softmax(h, raw(x), cstr(name), out), g)
"""    argmax!(g, x; dtype=Int64, name="")  — index of the first maximum of the last dim."""
argmax!(g::Graph, x::Tensor; dtype=Int64, name="") =
    tensor_op((h, out) -> L.weft_op_argmax(h, raw(x), dtype_code(dtype), cstr(name), out), g)
const REDUCE_KINDS = Dict(:sum => L.WEFT_REDUCE_SUM, :max => L.WEFT_REDUCE_MAX, :mean => L.WEFT_REDUCE_MEAN)
"""    reduce!(g, x, kind, axis; keepdim=false, name="")  — kind :sum, :max or :mean; axis is weft's (0-based,
row-major order, negative from the end)."""
function reduce!(g::Graph, x::Tensor, kind::Symbol, axis::Integer; keepdim::Bool=false, name="")
    haskey(REDUCE_KINDS, kind) || invalid("unknown reduction :$kind (expected :sum, :max or :mean)")
    tensor_op((h, out) -> L.weft_op_reduce(h, raw(x), REDUCE_KINDS[kind], Int32(axis), Cint(keepdim), cstr(name), out), g)
end
cast!(g::Graph, x::Tensor, dtype; name="") =
    tensor_op((h, out) -> L.weft_op_cast(h, raw(x), dtype_code(dtype), cstr(name), out), g)
function reshape!(g::Graph, x::Tensor, dims; name="")
    ds, names = c_dims(dims)
    f(h, out) = L.weft_op_reshape(h, raw(x), ds, Int32(length(ds)), cstr(name), out)
    return GC.@preserve names tensor_op(f, g)
end
"""    slice!(g, x, axis, start, stop; name="")  — elements [start, stop) of weft's (0-based) `axis`."""
slice!(g::Graph, x::Tensor, axis::Integer, start::Integer, stop::Integer; name="") =
    tensor_op((h, out) -> L.weft_op_slice(h, raw(x), Int32(axis), Int64(start), Int64(stop), cstr(name), out), g)
function concat!(g::Graph, xs, axis::Integer; name="")
    ids = L.weft_tensor[raw(t) for t in xs]
    tensor_op((h, out) -> L.weft_op_concat(h, ids, Int32(length(ids)), Int32(axis), cstr(name), out), g)
end

"""    mark_output!(g, t; name="")  — "" keeps the tensor's name."""
function mark_output!(g::Graph, t::Tensor; name="")
    GC.@preserve g check(L.weft_graph_mark_output(g.handle, raw(t), cstr(name)))
    return nothing
end

validate(g::Graph) = (GC.@preserve g check(L.weft_graph_validate(g.handle)); nothing)

"""    tensor_info(g, t)  — (name, kind, dtype, dims, is_output); kind a Symbol, dtype a Julia type, dims
Ints and Symbols in weft's order."""
function tensor_info(g::Graph, t::Tensor)
    i = Ref(L.weft_tensor_info())
    # The strings belong to the graph: copied while it is preserved.
    info, name, dims = GC.@preserve g begin
        check(L.weft_graph_tensor_info(g.handle, raw(t), i))
        v = i[]
        (v, unsafe_string(v.name), Union{Int64,Symbol}[d.symbol == C_NULL ? d.size : Symbol(unsafe_string(d.symbol))
                                                       for d in v.dims[1:min(Int(v.rank), L.WEFT_MAX_RANK)]])
    end
    dtype = something(findfirst(T -> dtype_of(T) == info.dtype, DTYPES), Symbol("dtype", info.dtype))
    return (name=name, kind=kind_symbol(info.kind), dtype=get(DTYPES, dtype, dtype), dims=dims,
        is_output=info.is_output != 0)
end

find_tensor(g::Graph, name) = tensor_op((h, out) -> L.weft_graph_find_tensor(h, cstr(name, false), out), g)

"""The outputs in marking order."""
function outputs(g::Graph)
    n = with_out(L.weft_graph_num_outputs, g, Int32, 0)
    return [tensor_op((h, out) -> L.weft_graph_output(h, Int32(i), out), g) for i in 0:n-1]
end

# The strings belong to the graph until it changes: copied while it is preserved.
function graph_string(f, g::Graph)
    s = Ref{Cstring}(C_NULL)
    return GC.@preserve g begin
        check(f(g.handle, s))
        unsafe_string(s[])
    end
end
"""Canonical JSON of the graph (stable across runs and processes)."""
to_json(g::Graph) = graph_string(L.weft_graph_to_json, g)
"""A readable listing (symbols, tensors, ops)."""
to_text(g::Graph) = graph_string(L.weft_graph_to_text, g)

"""XXH3-128 of the graph's structure (names left out)."""
function structural_hash(g::Graph)
    h = zeros(UInt64, 2)
    GC.@preserve g check(L.weft_graph_hash(g.handle, h))
    return UInt128(h[2]) << 64 | UInt128(h[1])
end
