# The decoder block of the conformance cases (bf16) and its independent check.

const D, QH, KVH, HD, FFN, SEQ = 64, 4, 2, 16, 128, 32
const EPS, THETA = 1.0f-6, 10000.0

# The weights in binding order (1-D ones are norm weights).
const WEIGHTS = [("attn_norm", (D,)), ("wq", (QH * HD, D)), ("wk", (KVH * HD, D)), ("wv", (KVH * HD, D)),
    ("wo", (D, QH * HD)), ("mlp_norm", (D,)), ("w_gate", (FFN, D)), ("w_up", (FFN, D)), ("w_down", (D, FFN))]
# Marked outputs: the block's result, then q, k (after rope), v and the attention for checks.
const OUTPUTS = ["out", "q", "k", "v", "attn"]

# rmsnorm, q/k/v linear, rope, attention_decode over :state caches, o linear + residual add, rmsnorm, gate/up
# linear, silu_mul, down linear + add: the layer of samples/decoder_block.cpp, unfused.
function build_decoder(ctx)
    g = Graph(ctx, "decoder_block")
    declare_symbol!(g, "batch", 1, 8)
    x = input!(g, "x", BFloat16, (:batch, D))
    pos = input!(g, "positions", Int32, (:batch,))
    w = Dict(name => weight!(g, name, BFloat16, shape) for (name, shape) in WEIGHTS)
    kc = state!(g, "k_cache", BFloat16, (:batch, SEQ, KVH, HD))
    vc = state!(g, "v_cache", BFloat16, (:batch, SEQ, KVH, HD))
    xn = rmsnorm!(g, x, w["attn_norm"]; eps=EPS, name="attn_in")
    q_raw = linear!(g, xn, w["wq"]; name="q_raw")
    k_raw = linear!(g, xn, w["wk"]; name="k_raw")
    v = linear!(g, xn, w["wv"]; name="v")
    q = rope!(g, q_raw, pos; head_dim=HD, theta=THETA, style=:half, name="q")
    k = rope!(g, k_raw, pos; head_dim=HD, theta=THETA, style=:half, name="k")
    attn = attention_decode!(g, q, k, v, kc, vc, pos; num_q_heads=QH, num_kv_heads=KVH, head_dim=HD, name="attn")
    o = linear!(g, attn, w["wo"]; name="o")
    h = Weft.add!(g, x, o; name="h")
    hn = rmsnorm!(g, h, w["mlp_norm"]; eps=EPS, name="mlp_in")
    gate = linear!(g, hn, w["w_gate"]; name="gate")
    up = linear!(g, hn, w["w_up"]; name="up")
    act = silu_mul!(g, gate, up; name="act")
    down = linear!(g, act, w["w_down"]; name="down")
    out = Weft.add!(g, h, down; name="out")
    for t in (out, q, k, v, attn)
        mark_output!(g, t)
    end
    return g
end

function decoder_data(batch, seed)
    r = Rng(seed)
    weights = map(WEIGHTS) do named_shape
        shape = named_shape[2]
        n = prod(shape)
        length(shape) == 1 ? to_bf16(1.0f0 .+ values!(r, n, 0.2)) : to_bf16(values!(r, n, 0.25))
    end
    x = to_bf16(values!(r, batch * D, 1.0))
    # Distinct positions; with several rows the last one writes the cache's last slot.
    pos = Int32[(b == batch - 1 && batch > 1) ? SEQ - 1 : (3 + 7b) % SEQ for b in 0:batch-1]
    n = batch * SEQ * KVH * HD
    return (batch=batch, weights=weights, x=x, pos=pos, k_cache=to_bf16(values!(r, n, 1.0)),
        v_cache=to_bf16(values!(r, n, 1.0)))
end

function shape_of(name, batch)
    name in ("x", "out") && return (batch, D)
    name == "positions" && return (batch,)
    name in ("q", "attn") && return (batch, QH * HD)
    name in ("k", "v") && return (batch, KVH * HD)
    name in ("k_cache", "v_cache") && return (batch, SEQ, KVH, HD)
    return WEIGHTS[findfirst(w -> w[1] == name, WEIGHTS)][2]
end

# Runs g on the reference, looking tensors up by name; returns the outputs (OUTPUTS order) and caches.
function run_decoder_reference(g, d)
    res = (outputs=[fill(BFloat16(0.0f0), prod(shape_of(o, d.batch))) for o in OUTPUTS],
        k_cache=copy(d.k_cache), v_cache=copy(d.v_cache))
    b = Bindings()
    bind!(b, find_tensor(g, "x"), d.x, shape_of("x", d.batch))
    bind!(b, find_tensor(g, "positions"), d.pos, shape_of("positions", d.batch))
    for ((name, shape), w) in zip(WEIGHTS, d.weights)
        bind!(b, find_tensor(g, name), w, shape)
    end
    bind!(b, find_tensor(g, "k_cache"), res.k_cache, shape_of("k_cache", d.batch))
    bind!(b, find_tensor(g, "v_cache"), res.v_cache, shape_of("v_cache", d.batch))
    for (name, o) in zip(OUTPUTS, res.outputs)
        bind!(b, find_tensor(g, name), o, shape_of(name, d.batch))
    end
    run_reference(g, b)
    return res
end

same_result(a, b) = a.outputs == b.outputs && a.k_cache == b.k_cache && a.v_cache == b.v_cache

# Rope (half style) of one row of `heads` heads, in Float64 then rounded to bf16.
function rope_row(x, pos, heads)
    y = zeros(Float32, heads * HD)
    half = HD ÷ 2
    for h in 0:heads-1, i in 0:half-1
        freq = THETA^(-2.0 * i / HD)
        s, c = sincos(pos * freq)
        a, b = Float64(x[h*HD+i+1]), Float64(x[h*HD+i+half+1])
        y[h*HD+i+1] = Float32(a * c - b * s)
        y[h*HD+i+half+1] = Float32(b * c + a * s)
    end
    return round_to(y, BFloat16)
end

# Decode attention for row b (0-based): q [QH*HD] over cache rows [0, pos] of the updated caches.
function attention_row(q, kc, vc, b, pos)
    scale = 1.0f0 / sqrt(Float32(HD))
    out = zeros(Float32, QH * HD)
    for h in 0:QH-1
        kvh = h ÷ (QH ÷ KVH)
        at(t) = ((b * SEQ + t) * KVH + kvh) * HD
        scores = Float32[sum(q[h*HD+i+1] * kc[at(t)+i+1] for i in 0:HD-1) * scale for t in 0:pos]
        e = exp.(scores .- maximum(scores))
        z = sum(e)
        for (t, p) in zip(0:pos, e), i in 0:HD-1
            out[h*HD+i+1] += p / z * vc[at(t)+i+1]
        end
    end
    return round_to(out, BFloat16)
end

# Checks a run against this file's arithmetic: every op given the rows the previous op produced (so one
# rounding difference does not snowball), and the cache writes bit for bit.
function check_decoder_semantics(d, r)
    bsz, bf = d.batch, BFloat16
    w = Dict(name => to_f32(v) for ((name, _), v) in zip(WEIGHTS, d.weights))
    out, q, k, v, attn = (to_f32(o) for o in r.outputs)
    tol = (abs_tol=0.03, rel_tol=0.02)
    qw, kw = QH * HD, KVH * HD

    x = to_f32(d.x)
    xn = round_to(rmsnorm(x, w["attn_norm"], EPS, bsz, D), bf)
    @test close_enough(v, round_to(linear(xn, w["wv"], nothing, bsz, D, kw), bf); tol...)
    q_raw = round_to(linear(xn, w["wq"], nothing, bsz, D, qw), bf)
    k_raw = round_to(linear(xn, w["wk"], nothing, bsz, D, kw), bf)
    for b in 0:bsz-1
        @test close_enough(q[b*qw+1:(b+1)*qw], rope_row(q_raw[b*qw+1:(b+1)*qw], d.pos[b+1], QH); tol...)
        @test close_enough(k[b*kw+1:(b+1)*kw], rope_row(k_raw[b*kw+1:(b+1)*kw], d.pos[b+1], KVH); tol...)
    end

    # Row pos[b] of sequence b holds that row's new k / v (bitwise); every other row is untouched.
    for (before, after, rows) in ((d.k_cache, r.k_cache, r.outputs[3]), (d.v_cache, r.v_cache, r.outputs[4]))
        for b in 0:bsz-1, t in 0:SEQ-1
            at = (b * SEQ + t) * kw
            want = t == d.pos[b+1] ? rows[b*kw+1:(b+1)*kw] : before[at+1:at+kw]
            @test after[at+1:at+kw] == want
        end
    end

    kc, vc = to_f32(r.k_cache), to_f32(r.v_cache)
    for b in 0:bsz-1
        @test close_enough(attn[b*qw+1:(b+1)*qw], attention_row(q[b*qw+1:(b+1)*qw], kc, vc, b, Int(d.pos[b+1])); tol...)
    end

    o = round_to(linear(attn, w["wo"], nothing, bsz, qw, D), bf)
    h = round_to(x .+ o, bf)
    hn = round_to(rmsnorm(h, w["mlp_norm"], EPS, bsz, D), bf)
    gate = round_to(linear(hn, w["w_gate"], nothing, bsz, D, FFN), bf)
    up = round_to(linear(hn, w["w_up"], nothing, bsz, D, FFN), bf)
    act = round_to(silu.(gate) .* up, bf)
    down = round_to(linear(act, w["w_down"], nothing, bsz, FFN, D), bf)
    @test close_enough(out, round_to(h .+ down, bf); tol...)
end
