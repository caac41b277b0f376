# Every error path throws WeftError with weft's status and message.

const INVALID = L.WEFT_ERROR_INVALID_ARGUMENT

@testset "errors" begin

@testset "shape mismatch names the op and operand" begin
    g = Graph(Context(), "bad")
    x = input!(g, "x", Float32, (2, 64))
    w = weight!(g, "w_wrong", Float32, (32, 48))
    expect_error(() -> linear!(g, x, w; name="y"), INVALID, "linear", "'weight'", "48")
    # The graph stays usable after a rejected op.
    w = weight!(g, "w", Float32, (32, 64))
    @test linear!(g, x, w; name="y") isa Tensor
end

@testset "undefined symbol is named" begin
    g = Graph(Context(), "bad")
    declare_symbol!(g, "batch", 1, 8)
    expect_error(() -> input!(g, "x", Float32, (:seq, 4)), INVALID, "seq")
    expect_error(() -> declare_symbol!(g, "batch", 1, 4), INVALID, "batch")
    expect_error(() -> declare_symbol!(g, "empty", 5, 2), INVALID, "empty")
end

@testset "wrong binding shape, missing binding, symbol out of range" begin
    m = build_mlp(Context(), Float32)
    d = mlp_data(2, Float32, 3)
    shapes = mlp_shapes(2)
    bindings(x, xshape, y) = begin
        b = Bindings()
        bind!(b, m.x, x, xshape)
        for (i, t) in enumerate((m.w1, m.b1, m.w2, m.b2))
            bind!(b, t, d[i+1], shapes[i+1])
        end
        y === nothing || bind!(b, m.y, y, (length(y) ÷ N, N))
        b
    end
    expect_error(() -> run_reference(m.g, bindings(zeros(Float32, 2 * (K + 1)), (2, K + 1), zeros(Float32, 2N))),
        INVALID, "'x'", "65")
    expect_error(() -> run_reference(m.g, bindings(d[1], shapes[1], nothing)), INVALID, "'y'", "not bound")
    expect_error(() -> run_reference(m.g, bind!(bindings(d[1], shapes[1], nothing), m.x, d[1], shapes[1])),
        INVALID, "'x'", "bound twice")
    expect_error(() -> run_reference(m.g, bindings(zeros(Float32, 9K), (9, K), zeros(Float32, 9N))),
        INVALID, "batch", "[1, 8]")
    # Checked here before weft sees the memory.
    expect_error(() -> bind!(Bindings(), m.x, zeros(Float32, 10), (1, K)), INVALID, "10")
    expect_error(() -> bind!(Bindings(), m.x, zeros(Float32, 10), (-1, 10)), INVALID, "negative")
    expect_error(() -> bind!(Bindings(), m.x, zeros(UInt8, K), (1, K)), INVALID, "UInt8")
    expect_error(() -> find_tensor(m.g, "a\0b"), INVALID, "NUL")
end

@testset "symbol policy and program option errors name the problem" begin
    m = build_mlp(Context(), Float32)
    expect_error(() -> set_symbol_policy!(m.g, "seq", :exact), INVALID, "weft_graph_set_symbol_policy",
        "symbol 'seq' is not declared")
    expect_error(() -> set_symbol_policy!(m.g, "batch", :buckets; buckets=[4, 2]), INVALID, "symbol 'batch'",
        "bucket 1 is 2", "not above the one before (4)", "ascending")
    expect_error(() -> set_symbol_policy!(m.g, "batch", :buckets; buckets=[100]), INVALID, "bucket 0 is 100", "[1, 8]")
    expect_error(() -> set_symbol_policy!(m.g, "batch", :runtime; buckets=[2, 4]), INVALID, "symbol 'batch'",
        "a bucket list is only for the BUCKETS policy")
    expect_error(() -> set_symbol_policy!(m.g, "batch", :fastest), INVALID, ":fastest")
    @test !occursin("policy", to_json(m.g)) # a refused policy changes nothing
    # Checked before any device is opened.
    expect_error(() -> Program(m.g; max_loaded_kernels=-1), INVALID, "weft_program_create", "max_loaded_kernels is -1")
    expect_error(() -> program_stats(Program(Ptr{L.weft_program}(C_NULL))), L.WEFT_ERROR_INVALID_HANDLE,
        "weft_program_get_stats")
end

@testset "malformed JSON is rejected" begin
    ctx = Context()
    expect_error(() -> graph_from_json(ctx, "{\"ops\": [1, 2"), INVALID, "parse")
    expect_error(() -> graph_from_json(ctx, "{}"), INVALID, "format")
    expect_error(() -> graph_from_json(ctx, "not json"), INVALID, "parse")
    broken = replace(to_json(build_mlp(ctx, Float32).g), "\"batch\"" => "17"; count=1)
    expect_error(() -> graph_from_json(ctx, broken), INVALID, "symbols[0].name")
end

@testset "bad compile arch is rejected" begin
    m = build_mlp(Context(), Float32)
    expect_error(() -> compile(m.g; arch="sm_42", disable_cache=true), INVALID, "sm_42")
end

@testset "foreign tensor, double output, unknown op" begin
    ctx = Context()
    a, b = Graph(ctx, "a"), Graph(ctx, "b")
    xa = input!(a, "x", Float32, (4,))
    input!(b, "x", Float32, (4,))
    expect_error(() -> silu!(b, xa), INVALID, "silu", "another graph")
    y = silu!(a, xa; name="y")
    mark_output!(a, y)
    expect_error(() -> mark_output!(a, y), INVALID, "'y'")
    expect_error(() -> mark_output!(a, xa), INVALID, "'x'")
    expect_error(() -> find_tensor(a, "nope"), INVALID, "nope")
    expect_error(() -> op!(a, "no_such_op", [xa]), INVALID, "no_such_op")
    expect_error(() -> op!(a, "silu", [xa]; attrs="{\"bogus\": 1}"), INVALID, "bogus")
end

@testset "position outside the cache is a run-time error" begin
    g = build_decoder(Context())
    d = decoder_data(2, 9)
    d.pos[2] = SEQ
    expect_error(() -> run_decoder_reference(g, d), INVALID, "attention_decode", "row 1")
end

@testset "closing twice is safe; a closed handle is reported" begin
    ctx = Context()
    m = build_mlp(ctx, Float32)
    close(ctx) # the graph keeps its context alive
    close(ctx)
    validate(m.g)
    close(m.g)
    close(m.g)
    expect_error(() -> validate(m.g), L.WEFT_ERROR_INVALID_HANDLE)
    expect_error(() -> silu!(m.g, m.x), L.WEFT_ERROR_INVALID_HANDLE)
    expect_error(() -> Graph(ctx, "after close"), L.WEFT_ERROR_INVALID_HANDLE)
    # Forgotten handles are released by their finalizers; weft keeps working afterwards.
    for _ in 1:20
        build_decoder(Context())
    end
    GC.gc()
    GC.gc()
    d = mlp_data(2, Float32, 1)
    m2 = build_mlp(Context(), Float32)
    @test close_enough(run_mlp_f32(m2.g, d, 2), mlp_expected(d, 2, Float32); abs_tol=1e-5, rel_tol=1e-4)
end

end # @testset "errors"
