//! The conformance cases every weft binding runs: an MLP and a decoder block on the CPU reference, checked
//! against arithmetic done here; JSON round trips; compiling without a GPU.
mod common;

use common::*;
use weft::{dims, Bf16, CompileOptions, Context, DType, Dim, Graph, HostBindings, SymbolPolicy, TensorKind};

#[test]
fn library_reports_its_version_and_ops() {
    assert_eq!(weft::version(), weft::sys::WEFT_VERSION);
    assert_eq!(weft::version_string(), "0.1.0");
    let ops = weft::op_names();
    for op in ["linear", "silu", "rmsnorm", "rope", "attention_decode", "silu_mul", "add"] {
        assert!(ops.iter().any(|o| o == op), "op table lacks {op}: {ops:?}");
    }
}

fn run_mlp_f32(m: &Mlp, d: &[Vec<f32>; 5], batch: usize) -> weft::Result<Vec<f32>> {
    let mut y = vec![0.0f32; batch * N];
    let mut b = HostBindings::new();
    b.read(m.x, &d[0], &[batch as i64, K as i64])?
        .read(m.w1, &d[1], &[HIDDEN as i64, K as i64])?
        .read(m.b1, &d[2], &[HIDDEN as i64])?
        .read(m.w2, &d[3], &[N as i64, HIDDEN as i64])?
        .read(m.b2, &d[4], &[N as i64])?
        .write(m.y, &mut y, &[batch as i64, N as i64])?;
    m.graph.run_reference(&b)?;
    Ok(y)
}

#[test]
fn mlp_f32_matches_independent_math() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    for batch in [1, 3, 8] {
        let d = mlp_data(batch, DType::F32, 11 + batch as u64);
        let y = run_mlp_f32(&m, &d, batch).unwrap();
        assert!(y.iter().any(|&v| v != 0.0));
        assert_close(&format!("y (batch {batch})"), &y, &mlp_expected(&d, batch, DType::F32), 1e-5, 1e-4);
    }
}

#[test]
fn mlp_bf16_matches_independent_math() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::Bf16).unwrap();
    let batch = 5;
    let d = mlp_data(batch, DType::Bf16, 7);
    let bf: Vec<Vec<Bf16>> = d.iter().map(|v| v.iter().map(|&f| Bf16::from_f32(f)).collect()).collect();
    let mut y = vec![Bf16(0); batch * N];
    let mut b = HostBindings::new();
    b.read(m.x, &bf[0], &[batch as i64, K as i64]).unwrap();
    b.read(m.w1, &bf[1], &[HIDDEN as i64, K as i64]).unwrap();
    b.read(m.b1, &bf[2], &[HIDDEN as i64]).unwrap();
    b.read(m.w2, &bf[3], &[N as i64, HIDDEN as i64]).unwrap();
    b.read(m.b2, &bf[4], &[N as i64]).unwrap();
    b.write(m.y, &mut y, &[batch as i64, N as i64]).unwrap();
    m.graph.run_reference(&b).unwrap();
    drop(b);
    // Two bf16 ulps of slack: one rounding of an intermediate may go the other way.
    assert_close("y", &to_f32(&y), &mlp_expected(&d, batch, DType::Bf16), 1e-3, 2.0 / 128.0);
}

#[test]
fn mlp_introspection_and_json_round_trip() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let g = &m.graph;
    g.validate().unwrap();
    assert_eq!(g.outputs().unwrap(), vec![m.y]);
    let info = g.tensor_info(m.x).unwrap();
    assert_eq!(info.name, "x");
    assert_eq!(info.kind, TensorKind::Input);
    assert_eq!(info.dtype, DType::F32);
    assert_eq!(info.dims, vec![Dim::Symbol("batch".into()), Dim::Fixed(K as i64)]);
    assert!(!info.is_output);
    let y = g.tensor_info(m.y).unwrap();
    assert_eq!((y.kind, y.is_output, y.dims.len()), (TensorKind::Intermediate, true, 2));
    assert_eq!(g.find_tensor("w2").unwrap(), m.w2);
    assert!(g.to_text().unwrap().contains("linear"));

    let json = g.to_json().unwrap();
    let back = Graph::from_json(&ctx, &json).unwrap();
    assert_eq!(back.to_json().unwrap(), json, "canonical JSON is not stable");
    assert_eq!(back.hash().unwrap(), g.hash().unwrap());
    assert_ne!(g.hash().unwrap(), 0);
    // A different graph hashes differently.
    let other = build_mlp(&ctx, DType::Bf16).unwrap();
    assert_ne!(other.graph.hash().unwrap(), g.hash().unwrap());

    // The reloaded graph computes the same bits (tensors looked up by name).
    let batch = 4;
    let d = mlp_data(batch, DType::F32, 99);
    let reloaded = Mlp {
        x: back.find_tensor("x").unwrap(),
        w1: back.find_tensor("w1").unwrap(),
        b1: back.find_tensor("b1").unwrap(),
        w2: back.find_tensor("w2").unwrap(),
        b2: back.find_tensor("b2").unwrap(),
        y: back.outputs().unwrap()[0],
        graph: back,
    };
    let a = run_mlp_f32(&m, &d, batch).unwrap();
    let b = run_mlp_f32(&reloaded, &d, batch).unwrap();
    assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}

#[test]
fn symbol_policy_survives_json_and_is_left_out_of_the_hash() {
    let ctx = Context::new().unwrap();
    let mut m = build_mlp(&ctx, DType::F32).unwrap();
    let (plain, hash) = (m.graph.to_json().unwrap(), m.graph.hash().unwrap());
    // Canonical JSON is indented: compared without whitespace.
    let compact = |s: &str| s.split_whitespace().collect::<String>();
    m.graph.set_symbol_policy("batch", SymbolPolicy::Buckets, &[2, 4]).unwrap();
    let json = m.graph.to_json().unwrap();
    assert!(compact(&json).contains(r#""buckets":[2,4,8]"#), "the maximum is not added: {json}");
    assert!(compact(&json).contains(r#""policy":"buckets""#), "{json}");
    // The kernels for one value are the same under every policy.
    assert_eq!(m.graph.hash().unwrap(), hash);
    let mut back = Graph::from_json(&ctx, &json).unwrap();
    assert_eq!(back.to_json().unwrap(), json);
    assert_eq!(back.hash().unwrap(), hash);

    for (policy, name) in
        [(SymbolPolicy::Exact, "exact"), (SymbolPolicy::Runtime, "runtime"), (SymbolPolicy::Buckets, "buckets")]
    {
        back.set_symbol_policy("batch", policy, &[]).unwrap();
        let j = back.to_json().unwrap();
        assert!(compact(&j).contains(&format!(r#""policy":"{name}""#)), "{j}");
        assert!(!compact(&j).contains(r#""buckets":["#), "{j}");
        assert_eq!(Graph::from_json(&ctx, &j).unwrap().to_json().unwrap(), j);
    }
    // AUTO is the default, which the JSON leaves out.
    back.set_symbol_policy("batch", SymbolPolicy::Auto, &[]).unwrap();
    assert_eq!(back.to_json().unwrap(), plain);

    // The reference does not depend on the policy.
    let d = mlp_data(3, DType::F32, 13);
    assert_close("y (buckets)", &run_mlp_f32(&m, &d, 3).unwrap(), &mlp_expected(&d, 3, DType::F32), 1e-5, 1e-4);
}

#[test]
fn decoder_block_on_the_reference() {
    let ctx = Context::new().unwrap();
    let g = build_decoder(&ctx).unwrap();
    g.validate().unwrap();
    for batch in [1, 3] {
        let d = decoder_data(batch, 40 + batch as u64);
        let r = run_decoder_reference(&g, &d).unwrap();
        check_decoder_semantics(&d, &r);
        // Deterministic: the same inputs and caches give the same bits.
        assert_eq!(run_decoder_reference(&g, &d).unwrap(), r);
    }
    let out = g.tensor_info(g.find_tensor("out").unwrap()).unwrap();
    assert_eq!((out.dtype, out.is_output), (DType::Bf16, true));
    assert_eq!(out.dims, vec![Dim::Symbol("batch".into()), Dim::Fixed(D as i64)]);
    let kc = g.tensor_info(g.find_tensor("k_cache").unwrap()).unwrap();
    assert_eq!(kc.kind, TensorKind::State);
    assert_eq!(g.outputs().unwrap().len(), OUTPUTS.len());
}

#[test]
fn decoder_block_through_json_gives_identical_bits() {
    let ctx = Context::new().unwrap();
    let g = build_decoder(&ctx).unwrap();
    let json = g.to_json().unwrap();
    let back = Graph::from_json(&ctx, &json).unwrap();
    assert_eq!(back.hash().unwrap(), g.hash().unwrap());
    assert_eq!(back.to_json().unwrap(), json);
    let d = decoder_data(4, 5);
    assert_eq!(run_decoder_reference(&back, &d).unwrap(), run_decoder_reference(&g, &d).unwrap());

    // Names are not part of the hash; structure is.
    let mut renamed = Graph::new(&ctx, "other_name").unwrap();
    renamed.declare_symbol("n", 1, 8).unwrap();
    let x = renamed.input("input", DType::F32, &dims!["n", 4]).unwrap();
    let y = renamed.silu(x, "act").unwrap();
    renamed.mark_output(y, "").unwrap();
    let mut same = Graph::new(&ctx, "").unwrap();
    same.declare_symbol("batch", 1, 8).unwrap();
    let x = same.input("x", DType::F32, &dims!["batch", 4]).unwrap();
    let y = same.silu(x, "").unwrap();
    same.mark_output(y, "").unwrap();
    assert_eq!(renamed.hash().unwrap(), same.hash().unwrap());
}

#[test]
fn the_reference_may_run_one_graph_from_several_threads() {
    let ctx = Context::new().unwrap();
    let g = build_decoder(&ctx).unwrap();
    let d = decoder_data(2, 77);
    let want = run_decoder_reference(&g, &d).unwrap();
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..3).map(|_| s.spawn(|| run_decoder_reference(&g, &d).unwrap())).collect();
        for r in runs {
            assert_eq!(r.join().unwrap(), want);
        }
    });
}

#[test]
fn mlp_compiles_without_a_gpu() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::Bf16).unwrap();
    let opts = CompileOptions { arch: Some("sm_90a".into()), num_sms: 8, disable_cache: true };
    let r = m.graph.compile(&opts).unwrap();
    println!("compile report: {r:?}");
    assert!(r.num_tasks > 0 && r.num_events > 0, "{r:?}");
    assert!(r.num_queues > 0 && r.num_queues <= 8, "{r:?}");
    assert!(r.cubin_bytes > 0 && r.arena_bytes >= 0, "{r:?}");
    assert!(!r.cache_hit, "cache disabled, yet a hit");
    assert!(r.compile_ms > 0.0 && r.total_ms >= r.compile_ms && r.lower_ms >= 0.0, "{r:?}");
    assert_eq!(r.key.len(), 32, "{r:?}");
    assert!(r.key.chars().all(|c| c.is_ascii_hexdigit()), "{r:?}");
}
