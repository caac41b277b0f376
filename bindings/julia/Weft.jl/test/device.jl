# The conformance cases on a GPU program, compared with the CPU reference; skipped, saying why, without a GPU.

const CU = Weft.CUDADriver

# Device 0 with its primary context current, or nothing after saying why there is no GPU.
function gpu_or_skip()
    n = try
        device_count()
    catch e
        e isa WeftError || rethrow()
        @info "device tests skipped: no GPU: $(sprint(showerror, e))"
        return nothing
    end
    if n < 1
        @info "device tests skipped: no GPU: weft_device_count reports 0 devices"
        return nothing
    end
    return CU.open_device(0)
end

@testset "device" begin
    dev = gpu_or_skip()
    if dev === nothing
        # Without a GPU, program creation is a CUDA error that says why.
        m = build_mlp(Context(), Float32)
        expect_error(() -> Program(m.g), L.WEFT_ERROR_CUDA)
        @test_throws ErrorException CU.open_device(0)
    else
        allocations = UInt64[]
        upload(A) = (p = CU.upload(dev, A); push!(allocations, p); p)
        alloc(bytes) = (p = CU.alloc(dev, bytes); push!(allocations, p); p)
        try
            @testset "MLP on the GPU matches the reference" begin
                m = build_mlp(Context(), BFloat16)
                p = Program(m.g; device_ordinal=0)
                for batch in (3, 8) # the second batch size specializes a new kernel
                    d = mlp_data(batch, BFloat16, 21 + batch)
                    shapes = mlp_shapes(batch)
                    b = DeviceBindings()
                    for (i, t) in enumerate((m.x, m.w1, m.b1, m.w2, m.b2))
                        bind!(b, t, upload(to_bf16(d[i])), BFloat16, shapes[i])
                    end
                    y_dev = alloc(batch * N * 2)
                    bind!(b, m.y, y_dev, BFloat16, shapes[6])
                    run!(p, b)
                    synchronize(p)
                    y = CU.download!(fill(BFloat16(0.0f0), batch * N), dev, y_dev)
                    @test close_enough(to_f32(y), mlp_expected(d, batch, BFloat16); abs_tol=0.02, rel_tol=0.02)
                end
                close(p)
            end

            @testset "decoder block on the GPU matches the reference" begin
                g = build_decoder(Context())
                d = decoder_data(3, 31)
                want = run_decoder_reference(g, d)
                p = Program(g; device_ordinal=0)
                kc, vc = upload(d.k_cache), upload(d.v_cache)
                outs = [alloc(length(o) * 2) for o in want.outputs]
                function device_bindings(pos)
                    b = DeviceBindings()
                    bind!(b, find_tensor(g, "x"), upload(d.x), BFloat16, shape_of("x", d.batch))
                    bind!(b, find_tensor(g, "positions"), upload(pos), Int32, shape_of("positions", d.batch))
                    for ((name, shape), w) in zip(WEIGHTS, d.weights)
                        bind!(b, find_tensor(g, name), upload(w), BFloat16, shape)
                    end
                    bind!(b, find_tensor(g, "k_cache"), kc, BFloat16, shape_of("k_cache", d.batch))
                    bind!(b, find_tensor(g, "v_cache"), vc, BFloat16, shape_of("v_cache", d.batch))
                    for (name, o) in zip(OUTPUTS, outs)
                        bind!(b, find_tensor(g, name), o, BFloat16, shape_of(name, d.batch))
                    end
                    return b
                end
                good = device_bindings(d.pos)
                run!(p, good)
                synchronize(p)
                got = (outputs=[CU.download!(similar(o), dev, buf) for (o, buf) in zip(want.outputs, outs)],
                    k_cache=CU.download!(similar(d.k_cache), dev, kc), v_cache=CU.download!(similar(d.v_cache), dev, vc))
                # The GPU's own results hang together op by op (its cache writes are its k / v bit for bit) ...
                check_decoder_semantics(d, got)
                # ... and stay close to the reference's.
                for (g_out, w_out) in zip(got.outputs, want.outputs)
                    @test close_enough(to_f32(g_out), to_f32(w_out); abs_tol=0.05, rel_tol=0.05)
                end
                @test close_enough(to_f32(got.k_cache), to_f32(want.k_cache); abs_tol=0.05, rel_tol=0.05)
                @test close_enough(to_f32(got.v_cache), to_f32(want.v_cache); abs_tol=0.05, rel_tol=0.05)

                # A position past the cache fails on the device: synchronize reports it; the program stays usable.
                expect_error(L.WEFT_ERROR_INVALID_ARGUMENT) do
                    run!(p, device_bindings(fill(Int32(SEQ), d.batch)))
                    synchronize(p)
                end
                run!(p, good)
                synchronize(p)
                close(p)
            end

            @testset "program rejects a wrong binding shape" begin
                m = build_mlp(Context(), Float32)
                p = Program(m.g; device_ordinal=0)
                buf = alloc(1 << 16)
                b = DeviceBindings()
                bind!(b, m.x, buf, Float32, (2, K + 1))
                for (t, s) in zip((m.w1, m.b1, m.w2, m.b2, m.y), mlp_shapes(2)[2:end])
                    bind!(b, t, buf, Float32, s)
                end
                expect_error(() -> run!(p, b), L.WEFT_ERROR_INVALID_ARGUMENT, "'x'")
                close(p)
            end
            # Runs the f32 MLP for `batch` rows on `p` and checks it against the arithmetic done here.
            function run_mlp_checked(p, m, batch, seed)
                d = mlp_data(batch, Float32, seed)
                shapes = mlp_shapes(batch)
                b = DeviceBindings()
                for (i, t) in enumerate((m.x, m.w1, m.b1, m.w2, m.b2))
                    bind!(b, t, upload(d[i]), Float32, shapes[i])
                end
                y_dev = alloc(batch * N * 4)
                bind!(b, m.y, y_dev, Float32, shapes[6])
                run!(p, b)
                synchronize(p)
                y = CU.download!(zeros(Float32, batch * N), dev, y_dev)
                @test close_enough(y, mlp_expected(d, batch, Float32); abs_tol=2e-3, rel_tol=2e-3)
            end

            @testset "lazy program runs on the generic kernel and reports stats" begin
                m = build_mlp(Context(), Float32)
                # Batch 3 runs on the kernel for 4; the generic kernel is the one for 8.
                set_symbol_policy!(m.g, "batch", :buckets; buckets=[2, 4])
                p = Program(m.g; device_ordinal=0, lazy=true, max_loaded_kernels=4)
                s = program_stats(p)
                @test (s.compiles, s.cache_loads, s.evictions, s.generic_runs, s.pending, s.loaded) == (0, 0, 0, 0, 0, 0)
                @test s.host_jit_ms >= 0 && (s.host_jit || (!s.host_jit_cache_hit && s.host_jit_ms == 0))
                # The kernel for 4 is not loaded: the generic kernel serves the run while it compiles.
                run_mlp_checked(p, m, 3, 41)
                s = program_stats(p)
                @test s.generic_runs == 1 && s.evictions == 0
                @test s.compiles + s.cache_loads >= 1 && s.loaded >= 1 # the generic kernel at least
                deadline = time() + 300
                while s.pending > 0 && time() < deadline
                    sleep(0.05)
                    s = program_stats(p)
                end
                @test s.pending == 0
                @test s.loaded == 2 && s.compiles + s.cache_loads == 2 # generic + the kernel for 4
                run_mlp_checked(p, m, 3, 42) # now on its own specialization
                @test program_stats(p).generic_runs == 1
                close(p)
                expect_error(() -> program_stats(p), L.WEFT_ERROR_INVALID_HANDLE)
            end

            @testset "max_loaded_kernels evicts the least recently used" begin
                m = build_mlp(Context(), Float32)
                set_symbol_policy!(m.g, "batch", :buckets; buckets=[2, 4])
                p = Program(m.g; device_ordinal=0, max_loaded_kernels=1)
                run_mlp_checked(p, m, 1, 51) # buckets 2 and 4: the second unloads the first
                run_mlp_checked(p, m, 3, 52)
                s = program_stats(p)
                @test (s.loaded, s.evictions, s.generic_runs, s.pending) == (1, 1, 0, 0)
                @test s.compiles + s.cache_loads == 2
                close(p)
            end
        finally
            foreach(p -> CU.free(dev, p), allocations)
            close(dev)
        end
    end
end
