//! Graph builders and independent f32 arithmetic shared by the conformance tests.
#![allow(dead_code)]

use weft::{dims, AttentionOptions, Bf16, Context, DType, Graph, Result, RopeOptions, Tensor};

/// xorshift64*: deterministic, no crates needed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [-scale, scale).
    pub fn uniform(&mut self, scale: f32) -> f32 {
        scale * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
    }
    /// n values, none of them zero (so a missing write cannot hide behind zeros).
    pub fn values(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| loop {
                let v = self.uniform(scale);
                if v != 0.0 {
                    break v;
                }
            })
            .collect()
    }
    pub fn bf16(&mut self, n: usize, scale: f32) -> Vec<Bf16> {
        self.values(n, scale).into_iter().map(Bf16::from_f32).collect()
    }
}

pub fn to_f32(v: &[Bf16]) -> Vec<f32> {
    v.iter().map(|b| b.to_f32()).collect()
}

/// What the reference does to a tensor of `dtype`: round each value to it.
pub fn round(v: Vec<f32>, dtype: DType) -> Vec<f32> {
    match dtype {
        DType::Bf16 => v.into_iter().map(|x| Bf16::from_f32(x).to_f32()).collect(),
        _ => v,
    }
}

/// x [rows, k] · w [n, k]ᵀ (+ bias [n]) in f32.
pub fn linear(x: &[f32], w: &[f32], bias: Option<&[f32]>, rows: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; rows * n];
    for r in 0..rows {
        for j in 0..n {
            let mut acc = 0.0f32;
            for i in 0..k {
                acc += x[r * k + i] * w[j * k + i];
            }
            y[r * n + j] = acc + bias.map_or(0.0, |b| b[j]);
        }
    }
    y
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32, rows: usize, d: usize) -> Vec<f32> {
    let mut y = vec![0.0; rows * d];
    for r in 0..rows {
        let row = &x[r * d..(r + 1) * d];
        let ms = row.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for i in 0..d {
            y[r * d + i] = row[i] * inv * w[i];
        }
    }
    y
}

/// |a - b| <= abs + rel * |b| for every element; panics naming the first that is not.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}[{i}] = {g} is not finite");
        assert!((g - w).abs() <= abs + rel * w.abs(), "{what}[{i}]: got {g}, want {w}");
    }
}

// ---- the MLP: x[batch, K] -> linear -> silu -> linear ----

pub const K: usize = 64;
pub const HIDDEN: usize = 96;
pub const N: usize = 32;

pub struct Mlp {
    pub graph: Graph,
    pub x: Tensor,
    pub w1: Tensor,
    pub b1: Tensor,
    pub w2: Tensor,
    pub b2: Tensor,
    pub y: Tensor,
}

pub fn build_mlp(ctx: &Context, dtype: DType) -> Result<Mlp> {
    let mut g = Graph::new(ctx, "mlp")?;
    g.declare_symbol("batch", 1, 8)?;
    let x = g.input("x", dtype, &dims!["batch", K])?;
    let w1 = g.weight("w1", dtype, &dims![HIDDEN, K])?;
    let b1 = g.weight("b1", dtype, &dims![HIDDEN])?;
    let w2 = g.weight("w2", dtype, &dims![N, HIDDEN])?;
    let b2 = g.weight("b2", dtype, &dims![N])?;
    let h = g.linear(x, w1, Some(b1), None, "h")?;
    let a = g.silu(h, "a")?;
    let y = g.linear(a, w2, Some(b2), None, "y")?;
    g.mark_output(y, "")?;
    Ok(Mlp { graph: g, x, w1, b1, w2, b2, y })
}

/// Random MLP operands, already rounded to `dtype`: [x, w1, b1, w2, b2].
pub fn mlp_data(batch: usize, dtype: DType, seed: u64) -> [Vec<f32>; 5] {
    let mut r = Rng::new(seed);
    [(batch * K, 1.0), (HIDDEN * K, 0.125), (HIDDEN, 0.1), (N * HIDDEN, 0.1), (N, 0.1)]
        .map(|(n, scale)| round(r.values(n, scale), dtype))
}

/// The MLP computed here, rounding each op's result to `dtype` as weft's reference does.
pub fn mlp_expected(d: &[Vec<f32>; 5], batch: usize, dtype: DType) -> Vec<f32> {
    let h = round(linear(&d[0], &d[1], Some(&d[2]), batch, K, HIDDEN), dtype);
    let a = round(h.into_iter().map(silu).collect(), dtype);
    round(linear(&a, &d[3], Some(&d[4]), batch, HIDDEN, N), dtype)
}

// ---- the decoder block (bf16) ----

pub const D: usize = 64;
pub const QH: usize = 4;
pub const KVH: usize = 2;
pub const HD: usize = 16;
pub const FFN: usize = 128;
pub const SEQ: usize = 32;
pub const EPS: f32 = 1e-6;
pub const THETA: f64 = 10000.0;

/// The weights of the decoder block: name and shape (1-D ones are norm weights).
pub const WEIGHTS: [(&str, &[usize]); 9] = [
    ("attn_norm", &[D]),
    ("wq", &[QH * HD, D]),
    ("wk", &[KVH * HD, D]),
    ("wv", &[KVH * HD, D]),
    ("wo", &[D, QH * HD]),
    ("mlp_norm", &[D]),
    ("w_gate", &[FFN, D]),
    ("w_up", &[FFN, D]),
    ("w_down", &[D, FFN]),
];

/// Outputs marked on the decoder: the block's result, then q, k (after rope), v and the attention for checks.
pub const OUTPUTS: [&str; 5] = ["out", "q", "k", "v", "attn"];

/// rmsnorm, q/k/v linear, rope, attention_decode over STATE caches, o linear + residual add, rmsnorm,
/// gate/up linear, silu_mul, down linear + add: the layer of samples/decoder_block.cpp, unfused.
pub fn build_decoder(ctx: &Context) -> Result<Graph> {
    let bf = DType::Bf16;
    let mut g = Graph::new(ctx, "decoder_block")?;
    g.declare_symbol("batch", 1, 8)?;
    let x = g.input("x", bf, &dims!["batch", D])?;
    let pos = g.input("positions", DType::I32, &dims!["batch"])?;
    let mut w = Vec::new();
    for (name, shape) in WEIGHTS {
        let dims: Vec<weft::Dim> = shape.iter().map(|&d| d.into()).collect();
        w.push(g.weight(name, bf, &dims)?);
    }
    let [attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down] = w[..] else { unreachable!() };
    let k_cache = g.state("k_cache", bf, &dims!["batch", SEQ, KVH, HD])?;
    let v_cache = g.state("v_cache", bf, &dims!["batch", SEQ, KVH, HD])?;

    let rope = RopeOptions { head_dim: HD as i64, theta: THETA, ..Default::default() };
    let attn_opts =
        AttentionOptions { num_q_heads: QH as i64, num_kv_heads: KVH as i64, head_dim: HD as i64, scale: 0.0 };
    let xn = g.rmsnorm(x, attn_norm, EPS, "attn_in")?;
    let q_raw = g.linear(xn, wq, None, None, "q_raw")?;
    let k_raw = g.linear(xn, wk, None, None, "k_raw")?;
    let v = g.linear(xn, wv, None, None, "v")?;
    let q = g.rope(q_raw, pos, &rope, "q")?;
    let k = g.rope(k_raw, pos, &rope, "k")?;
    let attn = g.attention_decode(q, k, v, k_cache, v_cache, pos, &attn_opts, "attn")?;
    let o = g.linear(attn, wo, None, None, "o")?;
    let h = g.add(x, o, "h")?;
    let hn = g.rmsnorm(h, mlp_norm, EPS, "mlp_in")?;
    let gate = g.linear(hn, w_gate, None, None, "gate")?;
    let up = g.linear(hn, w_up, None, None, "up")?;
    let act = g.silu_mul(gate, Some(up), "act")?;
    let down = g.linear(act, w_down, None, None, "down")?;
    let out = g.add(h, down, "out")?;
    for t in [out, q, k, v, attn] {
        g.mark_output(t, "")?;
    }
    Ok(g)
}

/// Random decoder data: weights (norm weights near 1) in WEIGHTS order, x, positions, caches.
#[derive(Clone)]
pub struct DecoderData {
    pub batch: usize,
    pub weights: Vec<Vec<Bf16>>,
    pub x: Vec<Bf16>,
    pub pos: Vec<i32>,
    pub k_cache: Vec<Bf16>,
    pub v_cache: Vec<Bf16>,
}

pub fn decoder_data(batch: usize, seed: u64) -> DecoderData {
    let mut r = Rng::new(seed);
    let weights = WEIGHTS
        .iter()
        .map(|(_, shape)| {
            let n = shape.iter().product();
            if shape.len() == 1 {
                r.values(n, 0.2).into_iter().map(|v| Bf16::from_f32(1.0 + v)).collect()
            } else {
                r.bf16(n, 0.25)
            }
        })
        .collect();
    let cache_n = batch * SEQ * KVH * HD;
    DecoderData {
        batch,
        weights,
        x: r.bf16(batch * D, 1.0),
        // Distinct positions; with several rows the last one writes the cache's last slot.
        pos: (0..batch).map(|b| if b + 1 == batch && batch > 1 { SEQ - 1 } else { (3 + 7 * b) % SEQ } as i32).collect(),
        k_cache: r.bf16(cache_n, 1.0),
        v_cache: r.bf16(cache_n, 1.0),
    }
}

pub fn shape_of(name: &str, batch: usize) -> Vec<i64> {
    let b = batch as i64;
    match name {
        "x" | "out" => vec![b, D as i64],
        "positions" => vec![b],
        "q" | "attn" => vec![b, (QH * HD) as i64],
        "k" | "v" => vec![b, (KVH * HD) as i64],
        "k_cache" | "v_cache" => vec![b, SEQ as i64, KVH as i64, HD as i64],
        _ => WEIGHTS.iter().find(|w| w.0 == name).unwrap().1.iter().map(|&d| d as i64).collect(),
    }
}

/// What a decoder run leaves: the outputs in OUTPUTS order and the updated caches.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderResult {
    pub outputs: Vec<Vec<Bf16>>,
    pub k_cache: Vec<Bf16>,
    pub v_cache: Vec<Bf16>,
}

/// Runs `g` (looking tensors up by name, so a graph read back from JSON works too) on the reference.
pub fn run_decoder_reference(g: &Graph, d: &DecoderData) -> Result<DecoderResult> {
    let mut res = DecoderResult {
        outputs: OUTPUTS.iter().map(|o| vec![Bf16(0); shape_of(o, d.batch).iter().product::<i64>() as usize]).collect(),
        k_cache: d.k_cache.clone(),
        v_cache: d.v_cache.clone(),
    };
    let mut b = weft::HostBindings::new();
    b.read(g.find_tensor("x")?, &d.x, &shape_of("x", d.batch))?;
    b.read(g.find_tensor("positions")?, &d.pos, &shape_of("positions", d.batch))?;
    for ((name, _), w) in WEIGHTS.iter().zip(&d.weights) {
        b.read(g.find_tensor(name)?, w, &shape_of(name, d.batch))?;
    }
    b.write(g.find_tensor("k_cache")?, &mut res.k_cache, &shape_of("k_cache", d.batch))?;
    b.write(g.find_tensor("v_cache")?, &mut res.v_cache, &shape_of("v_cache", d.batch))?;
    for (name, o) in OUTPUTS.iter().zip(res.outputs.iter_mut()) {
        b.write(g.find_tensor(name)?, o, &shape_of(name, d.batch))?;
    }
    g.run_reference(&b)?;
    drop(b);
    Ok(res)
}

/// Rope (half style) of one row of `heads` heads, in f64 then rounded to bf16.
pub fn rope_row(x: &[f32], pos: i32, heads: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; heads * HD];
    let half = HD / 2;
    for h in 0..heads {
        for i in 0..half {
            let freq = THETA.powf(-2.0 * i as f64 / HD as f64);
            let (s, c) = (pos as f64 * freq).sin_cos();
            let (a, b) = (x[h * HD + i] as f64, x[h * HD + i + half] as f64);
            y[h * HD + i] = (a * c - b * s) as f32;
            y[h * HD + i + half] = (b * c + a * s) as f32;
        }
    }
    round(y, DType::Bf16)
}

/// Decode attention for row `b`: q [QH*HD] over cache rows [0, pos] of the (updated) caches.
pub fn attention_row(q: &[f32], k_cache: &[f32], v_cache: &[f32], b: usize, pos: usize) -> Vec<f32> {
    let scale = 1.0 / (HD as f32).sqrt();
    let mut out = vec![0.0f32; QH * HD];
    for h in 0..QH {
        let kvh = h / (QH / KVH);
        let at = |t: usize| ((b * SEQ + t) * KVH + kvh) * HD;
        let scores: Vec<f32> =
            (0..=pos).map(|t| (0..HD).map(|i| q[h * HD + i] * k_cache[at(t) + i]).sum::<f32>() * scale).collect();
        let m = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
        let z: f32 = e.iter().sum();
        for (t, p) in e.iter().enumerate() {
            for i in 0..HD {
                out[h * HD + i] += p / z * v_cache[at(t) + i];
            }
        }
    }
    round(out, DType::Bf16)
}

/// Checks a decoder run against this file's own arithmetic: every op of the block, given the rows the
/// previous op produced (so one rounding difference does not snowball), and the cache writes bit for bit.
pub fn check_decoder_semantics(d: &DecoderData, r: &DecoderResult) {
    let (bsz, bf) = (d.batch, DType::Bf16);
    let w: Vec<Vec<f32>> = d.weights.iter().map(|w| to_f32(w)).collect();
    let [attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down] = &w[..] else { unreachable!() };
    let [out, q, k, v, attn] = &r.outputs[..] else { unreachable!() };
    let (out, q, k, v, attn) = (to_f32(out), to_f32(q), to_f32(k), to_f32(v), to_f32(attn));
    let (tol_abs, tol_rel) = (0.03, 0.02);

    let x = to_f32(&d.x);
    let xn = round(rmsnorm(&x, attn_norm, EPS, bsz, D), bf);
    assert_close("v", &v, &round(linear(&xn, wv, None, bsz, D, KVH * HD), bf), tol_abs, tol_rel);
    let q_raw = round(linear(&xn, wq, None, bsz, D, QH * HD), bf);
    let k_raw = round(linear(&xn, wk, None, bsz, D, KVH * HD), bf);
    for b in 0..bsz {
        let (qw, kw) = (QH * HD, KVH * HD);
        let q_want = rope_row(&q_raw[b * qw..(b + 1) * qw], d.pos[b], QH);
        assert_close(&format!("q row {b}"), &q[b * qw..(b + 1) * qw], &q_want, tol_abs, tol_rel);
        let k_want = rope_row(&k_raw[b * kw..(b + 1) * kw], d.pos[b], KVH);
        assert_close(&format!("k row {b}"), &k[b * kw..(b + 1) * kw], &k_want, tol_abs, tol_rel);
    }

    // The caches: row pos[b] of sequence b holds that row's new k / v (bitwise), every other row is untouched.
    let row = KVH * HD;
    for (name, before, after, new) in
        [("k_cache", &d.k_cache, &r.k_cache, &r.outputs[2]), ("v_cache", &d.v_cache, &r.v_cache, &r.outputs[3])]
    {
        for b in 0..bsz {
            for t in 0..SEQ {
                let at = (b * SEQ + t) * row;
                let got = &after[at..at + row];
                if t == d.pos[b] as usize {
                    assert_eq!(got, &new[b * row..(b + 1) * row], "{name}[{b}, {t}] is not the new row");
                } else {
                    assert_eq!(got, &before[at..at + row], "{name}[{b}, {t}] changed");
                }
            }
        }
    }

    let (kc, vc) = (to_f32(&r.k_cache), to_f32(&r.v_cache));
    for b in 0..bsz {
        let qw = QH * HD;
        let want = attention_row(&q[b * qw..(b + 1) * qw], &kc, &vc, b, d.pos[b] as usize);
        assert_close(&format!("attn row {b}"), &attn[b * qw..(b + 1) * qw], &want, tol_abs, tol_rel);
    }

    let o = round(linear(&attn, wo, None, bsz, QH * HD, D), bf);
    let h = round(x.iter().zip(&o).map(|(a, b)| a + b).collect(), bf);
    let hn = round(rmsnorm(&h, mlp_norm, EPS, bsz, D), bf);
    let gate = round(linear(&hn, w_gate, None, bsz, D, FFN), bf);
    let up = round(linear(&hn, w_up, None, bsz, D, FFN), bf);
    let act = round(gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect(), bf);
    let down = round(linear(&act, w_down, None, bsz, FFN, D), bf);
    let want = round(h.iter().zip(&down).map(|(a, b)| a + b).collect(), bf);
    assert_close("out", &out, &want, tol_abs, tol_rel);
}
