# Graph builders and independent Float32 arithmetic shared by the conformance tests. Data are flat vectors in
# weft's row-major order, bound with explicit shapes, so the index arithmetic matches the other bindings'.

const L = Weft.LibWeft

# xorshift64*: deterministic, no packages needed.
mutable struct Rng
    s::UInt64
end
Rng(seed::Integer) = Rng(UInt64(seed) * 0x9e3779b97f4a7c15 | 0x1)
function next!(r::Rng)
    x = r.s
    x ⊻= x >> 12
    x ⊻= x << 25
    x ⊻= x >> 27
    r.s = x
    return x * 0x2545f4914f6cdd1d
end
# n values in [-scale, scale), none of them zero (a missing write cannot hide behind zeros).
function values!(r::Rng, n::Integer, scale::Real)
    v = zeros(Float32, n)
    for i in 1:n
        while v[i] == 0
            v[i] = Float32(scale) * (Float32(next!(r) >> 40) / Float32(1 << 24) * 2 - 1)
        end
    end
    return v
end

to_bf16(v) = BFloat16.(Float32.(v))
to_f32(v::AbstractVector{BFloat16}) = Float32.(v)
round_to(v, dtype) = dtype === BFloat16 ? to_f32(to_bf16(v)) : v

# x [rows, k] · w [n, k]ᵀ (+ bias [n]) in Float32, summed in index order.
function linear(x, w, bias, rows, k, n)
    y = zeros(Float32, rows * n)
    for r in 0:rows-1, j in 0:n-1
        acc = 0.0f0
        for i in 0:k-1
            acc += x[r*k+i+1] * w[j*k+i+1]
        end
        y[r*n+j+1] = acc + (bias === nothing ? 0.0f0 : bias[j+1])
    end
    return y
end

silu(x::Float32) = x / (1.0f0 + exp(-x))

function rmsnorm(x, w, eps, rows, d)
    y = zeros(Float32, rows * d)
    for r in 0:rows-1
        ms = 0.0f0
        for i in 1:d
            ms += x[r*d+i]^2
        end
        inv = 1.0f0 / sqrt(ms / d + Float32(eps))
        for i in 1:d
            y[r*d+i] = x[r*d+i] * inv * w[i]
        end
    end
    return y
end

# |got - want| <= abs + rel * |want| everywhere, and finite.
function close_enough(got, want; abs_tol, rel_tol)
    length(got) == length(want) || return false
    return all(i -> isfinite(got[i]) && abs(got[i] - want[i]) <= abs_tol + rel_tol * abs(want[i]), eachindex(got))
end

# A WeftError of `status` whose message holds every needle.
function expect_error(f, status, needles...)
    err = try
        f()
        nothing
    catch e
        e
    end
    @test err isa WeftError
    err isa WeftError || return err
    @test err.status == status
    for n in needles
        @test occursin(n, err.message)
    end
    @test startswith(sprint(showerror, err), "WeftError: " * Weft.status_name(status))
    return err
end

# ---- the MLP: x[batch, K] -> linear -> silu -> linear ----

const K, HIDDEN, N = 64, 96, 32

function build_mlp(ctx, dtype)
    g = Graph(ctx, "mlp")
    declare_symbol!(g, "batch", 1, 8)
    x = input!(g, "x", dtype, (:batch, K))
    w1 = weight!(g, "w1", dtype, (HIDDEN, K))
    b1 = weight!(g, "b1", dtype, (HIDDEN,))
    w2 = weight!(g, "w2", dtype, (N, HIDDEN))
    b2 = weight!(g, "b2", dtype, (N,))
    h = linear!(g, x, w1; bias=b1, name="h")
    a = silu!(g, h; name="a")
    y = linear!(g, a, w2; bias=b2, name="y")
    mark_output!(g, y)
    return (g=g, x=x, w1=w1, b1=b1, w2=w2, b2=b2, y=y)
end

mlp_shapes(batch) = ((batch, K), (HIDDEN, K), (HIDDEN,), (N, HIDDEN), (N,), (batch, N))

# Random operands already rounded to dtype: x, w1, b1, w2, b2.
function mlp_data(batch, dtype, seed)
    r = Rng(seed)
    return [round_to(values!(r, n, s), dtype) for (n, s) in
            ((batch * K, 1.0), (HIDDEN * K, 0.125), (HIDDEN, 0.1), (N * HIDDEN, 0.1), (N, 0.1))]
end

# The MLP computed here, rounding each op's result to dtype as weft's reference does.
function mlp_expected(d, batch, dtype)
    h = round_to(linear(d[1], d[2], d[3], batch, K, HIDDEN), dtype)
    a = round_to(silu.(h), dtype)
    return round_to(linear(a, d[4], d[5], batch, HIDDEN, N), dtype)
end

# Binds by name (so a graph read back from JSON works too) and runs the reference in f32.
function run_mlp_f32(g, d, batch)
    y = zeros(Float32, batch * N)
    b = Bindings()
    shapes = mlp_shapes(batch)
    for (i, name) in enumerate(("x", "w1", "b1", "w2", "b2"))
        bind!(b, find_tensor(g, name), d[i], shapes[i])
    end
    bind!(b, outputs(g)[1], y, shapes[6])
    run_reference(g, b)
    return y
end
