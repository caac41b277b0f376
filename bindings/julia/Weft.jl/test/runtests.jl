# The conformance cases every weft binding runs: an MLP and a decoder block on the CPU reference checked
# against arithmetic done here, JSON round trips, compiling without a GPU, every error path, the GPU when
# there is one, and greedy generation when $WEFT_CLI names the weft command.
using Test
using Weft

include("common.jl")
include("decoder.jl")

@testset "Weft" begin

@testset "version and op table" begin
    @test Weft.version() == L.WEFT_VERSION
    @test Weft.version_string() == "0.1.0"
    ops = op_names()
    for op in ("linear", "silu", "rmsnorm", "rope", "attention_decode", "silu_mul", "add")
        @test op in ops
    end
    @test Weft.status_name(L.WEFT_ERROR_CUDA) == "WEFT_ERROR_CUDA"
    @test unsafe_string(L.weft_dtype_name(L.WEFT_DTYPE_BF16)) == "bf16"
    @test BFloat16(1.0f0).bits == 0x3f80
    @test Float32(BFloat16(1.0f0 + 1.0f0 / 256)) == 1.0f0 # a tie goes to even
    @test Float32(BFloat16(1.0f0 + 3.0f0 / 256)) == 1.0f0 + 4.0f0 / 256
end

@testset "MLP f32 matches independent math" begin
    ctx = Context()
    m = build_mlp(ctx, Float32)
    for batch in (1, 3, 8)
        d = mlp_data(batch, Float32, 11 + batch)
        y = run_mlp_f32(m.g, d, batch)
        @test any(!iszero, y)
        @test close_enough(y, mlp_expected(d, batch, Float32); abs_tol=1e-5, rel_tol=1e-4)
    end
    close(m.g)
    close(ctx)
end

@testset "MLP bf16 matches independent math" begin
    m = build_mlp(Context(), BFloat16)
    batch = 5
    d = mlp_data(batch, BFloat16, 7)
    y = fill(BFloat16(0.0f0), batch * N)
    b = Bindings()
    shapes = mlp_shapes(batch)
    for (i, t) in enumerate((m.x, m.w1, m.b1, m.w2, m.b2))
        bind!(b, t, to_bf16(d[i]), shapes[i])
    end
    bind!(b, m.y, y, shapes[6])
    run_reference(m.g, b)
    # Two bf16 ulps of slack: one rounding of an intermediate may go the other way.
    @test close_enough(to_f32(y), mlp_expected(d, batch, BFloat16); abs_tol=1e-3, rel_tol=2 / 128)
end

@testset "column-major arrays bind without a copy" begin
    m = build_mlp(Context(), Float32)
    batch = 3
    d = mlp_data(batch, Float32, 5)
    # A (K, batch) Matrix is weft's [batch, K]: the default shape is the reversed size.
    b = Bindings()
    bind!(b, m.x, reshape(d[1], K, batch))
    bind!(b, m.w1, reshape(d[2], K, HIDDEN))
    bind!(b, m.b1, d[3])
    bind!(b, m.w2, reshape(d[4], HIDDEN, N))
    bind!(b, m.b2, d[5])
    y = zeros(Float32, N, batch)
    bind!(b, m.y, y)
    run_reference(m.g, b)
    @test vec(y) == run_mlp_f32(m.g, d, batch)
end

@testset "MLP introspection and JSON round trip" begin
    ctx = Context()
    m = build_mlp(ctx, Float32)
    g = m.g
    validate(g)
    @test outputs(g) == [m.y]
    info = tensor_info(g, m.x)
    @test info.name == "x" && info.kind == :input && info.dtype === Float32 && !info.is_output
    @test info.dims == [:batch, K]
    y = tensor_info(g, m.y)
    @test y.kind == :intermediate && y.is_output
    @test find_tensor(g, "w2") == m.w2
    @test occursin("linear", to_text(g))

    json = to_json(g)
    back = graph_from_json(ctx, json)
    @test to_json(back) == json
    @test structural_hash(back) == structural_hash(g) != 0
    @test structural_hash(build_mlp(ctx, BFloat16).g) != structural_hash(g)
    d = mlp_data(4, Float32, 99)
    @test reinterpret(UInt32, run_mlp_f32(back, d, 4)) == reinterpret(UInt32, run_mlp_f32(g, d, 4))
end

@testset "symbol policy survives JSON and is left out of the hash" begin
    ctx = Context()
    m = build_mlp(ctx, Float32)
    plain, h = to_json(m.g), structural_hash(m.g)
    compact(s) = filter(!isspace, s) # canonical JSON is indented
    set_symbol_policy!(m.g, "batch", :buckets; buckets=[2, 4])
    json = to_json(m.g)
    @test occursin("\"buckets\":[2,4,8]", compact(json)) # the maximum is added
    @test occursin("\"policy\":\"buckets\"", compact(json))
    @test structural_hash(m.g) == h # the kernels for one value are the same under every policy
    back = graph_from_json(ctx, json)
    @test to_json(back) == json && structural_hash(back) == h
    for policy in (:exact, :runtime, :buckets)
        set_symbol_policy!(back, "batch", policy)
        j = to_json(back)
        @test occursin("\"policy\":\"$policy\"", compact(j)) && !occursin("\"buckets\":[", compact(j))
        @test to_json(graph_from_json(ctx, j)) == j
    end
    set_symbol_policy!(back, "batch", :auto) # the default, which the JSON leaves out
    @test to_json(back) == plain
    d = mlp_data(3, Float32, 13) # the reference does not depend on the policy
    @test close_enough(run_mlp_f32(m.g, d, 3), mlp_expected(d, 3, Float32); abs_tol=1e-5, rel_tol=1e-4)
end

@testset "decoder block on the reference" begin
    g = build_decoder(Context())
    validate(g)
    for batch in (1, 3)
        d = decoder_data(batch, 40 + batch)
        r = run_decoder_reference(g, d)
        check_decoder_semantics(d, r)
        @test same_result(run_decoder_reference(g, d), r) # deterministic
    end
    out = tensor_info(g, find_tensor(g, "out"))
    @test out.dtype === BFloat16 && out.is_output && out.dims == [:batch, D]
    @test tensor_info(g, find_tensor(g, "k_cache")).kind == :state
    @test length(outputs(g)) == length(OUTPUTS)
end

@testset "decoder block through JSON gives identical bits" begin
    ctx = Context()
    g = build_decoder(ctx)
    json = to_json(g)
    back = graph_from_json(ctx, json)
    @test structural_hash(back) == structural_hash(g)
    @test to_json(back) == json
    d = decoder_data(4, 5)
    @test same_result(run_decoder_reference(back, d), run_decoder_reference(g, d))
end

@testset "MLP compiles without a GPU" begin
    m = build_mlp(Context(), BFloat16)
    r = compile(m.g; arch="sm_90a", num_sms=8, disable_cache=true)
    @test r.num_tasks > 0 && r.num_events > 0 && 0 < r.num_queues <= 8
    @test r.cubin_bytes > 0 && r.arena_bytes >= 0 && !r.cache_hit
    @test r.compile_ms > 0 && r.total_ms >= r.compile_ms && r.lower_ms >= 0
    @test length(r.key) == 32 && all(c -> c in "0123456789abcdefABCDEF", r.key)
end

include("errors.jl")
include("device.jl")
include("model.jl")

end # @testset "Weft"
