//! Every error path returns weft::Error with weft's status and message.
mod common;

use common::*;
use weft::{
    dims, sys, CompileOptions, Context, DType, Graph, HostBindings, Program, ProgramOptions, Status, SymbolPolicy,
};

fn expect_err<T: std::fmt::Debug>(r: weft::Result<T>, status: Status, needles: &[&str]) -> weft::Error {
    let e = r.expect_err("the call succeeded");
    println!("{e}");
    assert_eq!(e.status(), status, "{e}");
    for n in needles {
        assert!(e.message().contains(n), "message lacks {n:?}: {e}");
    }
    assert!(e.to_string().starts_with(status.name()), "{e}");
    e
}

#[test]
fn shape_mismatch_names_the_op_and_tensor() {
    let ctx = Context::new().unwrap();
    let mut g = Graph::new(&ctx, "bad").unwrap();
    let x = g.input("x", DType::F32, &dims![2, 64]).unwrap();
    let w = g.weight("w_wrong", DType::F32, &dims![32, 48]).unwrap();
    expect_err(g.linear(x, w, None, None, "y"), Status::InvalidArgument, &["linear", "'weight'", "48"]);
    // The graph stays usable after a rejected op.
    let w = g.weight("w", DType::F32, &dims![32, 64]).unwrap();
    g.linear(x, w, None, None, "y").unwrap();
}

#[test]
fn undefined_symbol_is_named() {
    let ctx = Context::new().unwrap();
    let mut g = Graph::new(&ctx, "bad").unwrap();
    g.declare_symbol("batch", 1, 8).unwrap();
    expect_err(g.input("x", DType::F32, &dims!["seq", 4]), Status::InvalidArgument, &["seq"]);
    expect_err(g.declare_symbol("batch", 1, 4), Status::InvalidArgument, &["batch"]);
    expect_err(g.declare_symbol("empty", 5, 2), Status::InvalidArgument, &["empty"]);
}

#[test]
fn symbol_policy_errors_name_the_problem() {
    let ctx = Context::new().unwrap();
    let mut m = build_mlp(&ctx, DType::F32).unwrap();
    let g = &mut m.graph;
    let invalid = Status::InvalidArgument;
    expect_err(
        g.set_symbol_policy("seq", SymbolPolicy::Exact, &[]),
        invalid,
        &["weft_graph_set_symbol_policy", "symbol 'seq' is not declared"],
    );
    expect_err(
        g.set_symbol_policy("batch", SymbolPolicy::Buckets, &[4, 2]),
        invalid,
        &["symbol 'batch'", "bucket 1 is 2", "not above the one before (4)", "ascending"],
    );
    expect_err(g.set_symbol_policy("batch", SymbolPolicy::Buckets, &[100]), invalid, &["bucket 0 is 100", "[1, 8]"]);
    expect_err(
        g.set_symbol_policy("batch", SymbolPolicy::Runtime, &[2, 4]),
        invalid,
        &["symbol 'batch'", "a bucket list is only for the BUCKETS policy"],
    );
    expect_err(g.set_symbol_policy("ba\0tch", SymbolPolicy::Exact, &[]), invalid, &["NUL"]);
    // A refused policy changes nothing.
    assert!(!g.to_json().unwrap().contains("policy"));
}

#[test]
fn negative_max_loaded_kernels_is_refused_before_any_device() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let opts = ProgramOptions { max_loaded_kernels: -1, ..Default::default() };
    expect_err(
        Program::new(&m.graph, &opts),
        Status::InvalidArgument,
        &["weft_program_create", "max_loaded_kernels is -1"],
    );
}

#[test]
fn wrong_binding_shape_is_named() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let d = mlp_data(2, DType::F32, 3);
    let x_bad = vec![1.0f32; 2 * (K + 1)];
    let mut y = vec![0.0f32; 2 * N];
    let mut b = HostBindings::new();
    b.read(m.x, &x_bad, &[2, K as i64 + 1]).unwrap();
    b.read(m.w1, &d[1], &[HIDDEN as i64, K as i64]).unwrap();
    b.read(m.b1, &d[2], &[HIDDEN as i64]).unwrap();
    b.read(m.w2, &d[3], &[N as i64, HIDDEN as i64]).unwrap();
    b.read(m.b2, &d[4], &[N as i64]).unwrap();
    b.write(m.y, &mut y, &[2, N as i64]).unwrap();
    expect_err(m.graph.run_reference(&b), Status::InvalidArgument, &["x"]);
}

#[test]
fn symbol_outside_its_range_and_missing_binding_are_errors() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let batch = 9; // batch is declared in [1, 8]
    let d = mlp_data(batch, DType::F32, 3);
    let mut y = vec![0.0f32; batch * N];
    let mut b = HostBindings::new();
    b.read(m.x, &d[0], &[batch as i64, K as i64]).unwrap();
    b.read(m.w1, &d[1], &[HIDDEN as i64, K as i64]).unwrap();
    b.read(m.b1, &d[2], &[HIDDEN as i64]).unwrap();
    b.read(m.w2, &d[3], &[N as i64, HIDDEN as i64]).unwrap();
    b.read(m.b2, &d[4], &[N as i64]).unwrap();
    expect_err(m.graph.run_reference(&b), Status::InvalidArgument, &["y"]); // y is not bound
    let mut twice = HostBindings::new();
    twice.read(m.x, &d[0], &[batch as i64, K as i64]).unwrap();
    twice.read(m.x, &d[0], &[batch as i64, K as i64]).unwrap();
    expect_err(m.graph.run_reference(&twice), Status::InvalidArgument, &["'x'", "bound twice"]);
    b.write(m.y, &mut y, &[batch as i64, N as i64]).unwrap();
    expect_err(m.graph.run_reference(&b), Status::InvalidArgument, &["batch"]);
}

#[test]
fn slices_are_checked_before_weft_sees_them() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let short = vec![0.0f32; 10];
    let mut b = HostBindings::new();
    expect_err(b.read(m.x, &short, &[1, K as i64]).map(|_| ()), Status::InvalidArgument, &["10"]);
    expect_err(b.read(m.x, &short, &[-1, 10]).map(|_| ()), Status::InvalidArgument, &["negative"]);
    // A shared slice bound to the output would be written through: refused.
    let (x, y) = (vec![0.0f32; K], vec![0.0f32; N]);
    b.read(m.x, &x, &[1, K as i64]).unwrap();
    b.read(m.y, &y, &[1, N as i64]).unwrap();
    expect_err(m.graph.run_reference(&b), Status::InvalidArgument, &["'y'", "write"]);
}

#[test]
fn malformed_json_is_rejected() {
    let ctx = Context::new().unwrap();
    expect_err(Graph::from_json(&ctx, "{\"ops\": [1, 2"), Status::InvalidArgument, &["parse"]);
    expect_err(Graph::from_json(&ctx, "{}"), Status::InvalidArgument, &["format"]);
    expect_err(Graph::from_json(&ctx, "not json"), Status::InvalidArgument, &["parse"]);
    let valid = build_mlp(&ctx, DType::F32).unwrap().graph.to_json().unwrap();
    // A valid document with one field's type broken names the field.
    let broken = valid.replacen("\"batch\"", "17", 1);
    assert_ne!(broken, valid);
    expect_err(Graph::from_json(&ctx, &broken), Status::InvalidArgument, &["symbols[0].name"]);
    expect_err(Graph::from_json(&ctx, "a\0b"), Status::InvalidArgument, &["NUL"]);
}

#[test]
fn bad_compile_arch_is_rejected() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let opts = CompileOptions { arch: Some("sm_42".into()), disable_cache: true, ..Default::default() };
    expect_err(m.graph.compile(&opts), Status::InvalidArgument, &["sm_42"]);
}

#[test]
fn foreign_tensor_and_double_output_are_rejected() {
    let ctx = Context::new().unwrap();
    let mut a = Graph::new(&ctx, "a").unwrap();
    let mut b = Graph::new(&ctx, "b").unwrap();
    let xa = a.input("x", DType::F32, &dims![4]).unwrap();
    b.input("x", DType::F32, &dims![4]).unwrap();
    expect_err(b.silu(xa, ""), Status::InvalidArgument, &["silu", "another graph"]);
    let y = a.silu(xa, "y").unwrap();
    a.mark_output(y, "").unwrap();
    expect_err(a.mark_output(y, ""), Status::InvalidArgument, &["y"]);
    expect_err(a.mark_output(xa, ""), Status::InvalidArgument, &["x"]); // not produced by an op
    expect_err(a.find_tensor("nope"), Status::InvalidArgument, &["nope"]);
    expect_err(a.op("no_such_op", &[xa], "", ""), Status::InvalidArgument, &["no_such_op"]);
    expect_err(a.op("silu", &[xa], "{\"bogus\": 1}", ""), Status::InvalidArgument, &["bogus"]);
}

#[test]
fn position_outside_the_cache_is_a_run_time_error() {
    let ctx = Context::new().unwrap();
    let g = build_decoder(&ctx).unwrap();
    let mut d = decoder_data(2, 9);
    d.pos[1] = SEQ as i32; // one past the cache
    expect_err(run_decoder_reference(&g, &d), Status::InvalidArgument, &["attn"]);
}

#[test]
fn handles_drop_in_any_order_and_dead_handles_are_reported() {
    // The graph keeps its context alive: dropping the context first is fine.
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    drop(ctx);
    m.graph.validate().unwrap();
    drop(m);

    // Through the raw API, which is what Drop calls: NULL is a no-op, a dead handle is reported, not touched.
    unsafe {
        sys::weft_graph_destroy(std::ptr::null_mut());
        sys::weft_context_destroy(std::ptr::null_mut());
        sys::weft_program_destroy(std::ptr::null_mut());
        sys::weft_model_destroy(std::ptr::null_mut());
        let mut c = std::ptr::null_mut();
        assert_eq!(sys::weft_context_create(std::ptr::null(), &mut c), sys::WEFT_OK);
        let mut g = std::ptr::null_mut();
        assert_eq!(sys::weft_graph_create(c, std::ptr::null(), &mut g), sys::WEFT_OK);
        sys::weft_graph_destroy(g);
        sys::weft_graph_destroy(g); // a second destroy of a tracked, dead handle is a no-op
        assert_eq!(sys::weft_graph_validate(g), sys::WEFT_ERROR_INVALID_HANDLE);
        let mut out = 0u64;
        let name = c"x";
        let s = sys::weft_graph_add_tensor(
            g,
            sys::WEFT_TENSOR_INPUT,
            name.as_ptr(),
            sys::WEFT_DTYPE_F32,
            std::ptr::null(),
            0,
            &mut out,
        );
        assert_eq!(s, sys::WEFT_ERROR_INVALID_HANDLE);
        sys::weft_context_destroy(c);
        sys::weft_context_destroy(c);
        let mut g2 = std::ptr::null_mut();
        assert_eq!(sys::weft_graph_create(c, std::ptr::null(), &mut g2), sys::WEFT_ERROR_INVALID_HANDLE);
        assert!(g2.is_null(), "out-parameter written on error");
        let mut stats = sys::weft_program_stats {
            struct_size: std::mem::size_of::<sys::weft_program_stats>(),
            ..Default::default()
        };
        assert_eq!(sys::weft_program_get_stats(std::ptr::null_mut(), &mut stats), sys::WEFT_ERROR_INVALID_HANDLE);
    }
}

#[test]
fn error_messages_are_per_thread() {
    let ctx = Context::new().unwrap();
    let mut g = Graph::new(&ctx, "t").unwrap();
    let e = g.input("x", DType::F32, &dims!["undeclared_here"]).unwrap_err();
    // Another thread's failure does not change the message this thread already holds in its Error,
    // and that thread gets its own message.
    let other = std::thread::spawn(|| {
        let ctx = Context::new().unwrap();
        Graph::from_json(&ctx, "[").unwrap_err()
    })
    .join()
    .unwrap();
    assert!(e.message().contains("undeclared_here"));
    assert!(!other.message().contains("undeclared_here"));
}
