# Models: a random tiny Llama checkpoint (written by the weft command in $WEFT_CLI, or a folder named in
# $WEFT_MODEL_DIR) generated greedily on the CPU reference.

@testset "models" begin
    expect_error(() -> Model(Context(), joinpath(tempdir(), "weft-no-such-model-folder"); backend=:reference),
        INVALID, "weft-no-such-model-folder")

    dir = get(ENV, "WEFT_MODEL_DIR", "")
    if isempty(dir) && haskey(ENV, "WEFT_CLI")
        dir = joinpath(mktempdir(), "tiny-llama")
        run(`$(ENV["WEFT_CLI"]) checkpoint tiny-llama $dir`)
    end
    if isempty(dir)
        @info "generation test skipped: set WEFT_CLI to the weft command (or WEFT_MODEL_DIR to a model folder)"
    else
        m = Model(Context(), dir; backend=:reference, max_batch=2, max_seq=16)
        info = model_info(m)
        @test info.backend == :reference && info.max_batch == 2 && info.max_seq == 16
        @test info.layers >= 1 && info.vocab > 0 && info.weight_bytes > 0 && info.model_type in ("llama", "qwen3")
        prompts = Int32[1 100; 5 7; 9 3] # one prompt per column: (prompt_len, batch) = (3, 2)
        steps = 4
        r = generate(m, prompts, steps; logits=true)
        @test size(r.tokens) == (steps, 2) && length(r.step_ms) == steps
        # Each token is the first maximum of its step's logits (argmax is 1-based here, ids 0-based).
        for s in 1:steps, b in 1:2
            @test r.tokens[s, b] == argmax(r.logits[:, b, s]) - 1
        end
        # Deterministic, and teacher forcing with its own tokens changes nothing.
        @test generate(m, prompts, steps).tokens == r.tokens
        @test generate(m, prompts, steps; forced=r.tokens).tokens == r.tokens
        bad = copy(prompts)
        bad[1, 1] = info.vocab
        expect_error(() -> generate(m, bad, steps), INVALID, "prompt[0][0]")
        expect_error(() -> generate(m, zeros(Int32, 3, 3), steps), INVALID, "batch")
        expect_error(() -> generate(m, prompts, steps; forced=zeros(Int32, 2, 2)), INVALID, "forced")
        close(m)
        close(m)
    end
end
