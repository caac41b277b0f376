//! The conformance cases on a GPU program, compared with the CPU reference. Without a GPU each test prints
//! why it skipped and passes.
mod common;

use common::*;
use weft::cuda::{DeviceBuffer, Driver};
use weft::{
    Bf16, Context, DType, DeviceBindings, Graph, Program, ProgramOptions, ProgramStats, Status, Stream, SymbolPolicy,
};

/// The driver with device 0's primary context current, or None after printing why there is no GPU.
fn gpu(test: &str) -> Option<Driver> {
    match weft::device_count() {
        Ok(n) if n >= 1 => Some(Driver::open(0).expect("weft sees a GPU but the driver API cannot open it")),
        Ok(_) => {
            println!("{test}: skipped: no GPU: weft_device_count reports 0 devices");
            None
        }
        Err(e) => {
            println!("{test}: skipped: no GPU: {e}");
            None
        }
    }
}

fn program(g: &Graph) -> Program {
    Program::new(g, &ProgramOptions { device_ordinal: 0, ..Default::default() }).unwrap()
}

#[test]
fn program_create_without_a_gpu_is_a_cuda_error() {
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    match weft::device_count() {
        Ok(n) if n >= 1 => println!("skipped: a GPU is present ({n} devices): program creation succeeds there"),
        _ => {
            let e = Program::new(&m.graph, &ProgramOptions::default()).unwrap_err();
            println!("{e}");
            assert_eq!(e.status(), Status::Cuda, "{e}");
            assert!(!e.message().is_empty());
        }
    }
}

#[test]
fn mlp_on_the_gpu_matches_the_reference() {
    let Some(drv) = gpu("mlp_on_the_gpu_matches_the_reference") else { return };
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::Bf16).unwrap();
    let mut p = program(&m.graph);
    // Two batch sizes: the second run specializes a new kernel.
    for batch in [3usize, 8] {
        let d = mlp_data(batch, DType::Bf16, 21 + batch as u64);
        let bf: Vec<Vec<Bf16>> = d.iter().map(|v| v.iter().map(|&f| Bf16::from_f32(f)).collect()).collect();
        let bufs: Vec<DeviceBuffer> = bf.iter().map(|v| drv.upload(v).unwrap()).collect();
        let y_dev = drv.alloc(batch * N * 2).unwrap();
        let mut b = DeviceBindings::new();
        let (bt, k, h, n) = (batch as i64, K as i64, HIDDEN as i64, N as i64);
        b.add(m.x, bufs[0].ptr(), DType::Bf16, &[bt, k])
            .add(m.w1, bufs[1].ptr(), DType::Bf16, &[h, k])
            .add(m.b1, bufs[2].ptr(), DType::Bf16, &[h])
            .add(m.w2, bufs[3].ptr(), DType::Bf16, &[n, h])
            .add(m.b2, bufs[4].ptr(), DType::Bf16, &[n])
            .add(m.y, y_dev.ptr(), DType::Bf16, &[bt, n]);
        // SAFETY: every buffer holds its shape's elements and outlives the synchronize below.
        unsafe { p.run(&b, Stream::DEFAULT) }.unwrap();
        p.synchronize(Stream::DEFAULT).unwrap();
        let mut y = vec![Bf16(0); batch * N];
        y_dev.copy_to(&mut y).unwrap();
        assert_close(&format!("gpu y (batch {batch})"), &to_f32(&y), &mlp_expected(&d, batch, DType::Bf16), 0.02, 0.02);
    }
}

#[test]
fn decoder_block_on_the_gpu_matches_the_reference() {
    let Some(drv) = gpu("decoder_block_on_the_gpu_matches_the_reference") else { return };
    let ctx = Context::new().unwrap();
    let g = build_decoder(&ctx).unwrap();
    let d = decoder_data(3, 31);
    let want = run_decoder_reference(&g, &d).unwrap();

    let mut p = program(&g);
    let bt = d.batch;
    let id = |name: &str| g.find_tensor(name).unwrap();
    let x = drv.upload(&d.x).unwrap();
    let pos = drv.upload(&d.pos).unwrap();
    let weights: Vec<DeviceBuffer> = d.weights.iter().map(|w| drv.upload(w).unwrap()).collect();
    let kc = drv.upload(&d.k_cache).unwrap();
    let vc = drv.upload(&d.v_cache).unwrap();
    let outs: Vec<DeviceBuffer> = want.outputs.iter().map(|o| drv.alloc(o.len() * 2).unwrap()).collect();
    let mut b = DeviceBindings::new();
    b.add(id("x"), x.ptr(), DType::Bf16, &shape_of("x", bt));
    b.add(id("positions"), pos.ptr(), DType::I32, &shape_of("positions", bt));
    for ((name, _), w) in WEIGHTS.iter().zip(&weights) {
        b.add(id(name), w.ptr(), DType::Bf16, &shape_of(name, bt));
    }
    b.add(id("k_cache"), kc.ptr(), DType::Bf16, &shape_of("k_cache", bt));
    b.add(id("v_cache"), vc.ptr(), DType::Bf16, &shape_of("v_cache", bt));
    for (name, o) in OUTPUTS.iter().zip(&outs) {
        b.add(id(name), o.ptr(), DType::Bf16, &shape_of(name, bt));
    }
    // SAFETY: every buffer holds its shape's elements and outlives the synchronize below.
    unsafe { p.run(&b, Stream::DEFAULT) }.unwrap();
    p.synchronize(Stream::DEFAULT).unwrap();

    let mut got =
        DecoderResult { outputs: want.outputs.clone(), k_cache: d.k_cache.clone(), v_cache: d.v_cache.clone() };
    for (o, buf) in got.outputs.iter_mut().zip(&outs) {
        buf.copy_to(o).unwrap();
    }
    kc.copy_to(&mut got.k_cache).unwrap();
    vc.copy_to(&mut got.v_cache).unwrap();
    // The GPU's own results hang together op by op (and its cache writes are its k / v bit for bit) ...
    check_decoder_semantics(&d, &got);
    // ... and stay close to the reference's.
    for (name, (g_out, w_out)) in OUTPUTS.iter().zip(got.outputs.iter().zip(&want.outputs)) {
        assert_close(&format!("gpu {name}"), &to_f32(g_out), &to_f32(w_out), 0.05, 0.05);
    }
    assert_close("gpu k_cache", &to_f32(&got.k_cache), &to_f32(&want.k_cache), 0.05, 0.05);
    assert_close("gpu v_cache", &to_f32(&got.v_cache), &to_f32(&want.v_cache), 0.05, 0.05);

    // A device-side precondition failure is reported by synchronize, and the program stays usable.
    let bad_pos = drv.upload(&vec![SEQ as i32; bt]).unwrap();
    let mut b2 = DeviceBindings::new();
    b2.add(id("x"), x.ptr(), DType::Bf16, &shape_of("x", bt));
    b2.add(id("positions"), bad_pos.ptr(), DType::I32, &shape_of("positions", bt));
    for ((name, _), w) in WEIGHTS.iter().zip(&weights) {
        b2.add(id(name), w.ptr(), DType::Bf16, &shape_of(name, bt));
    }
    b2.add(id("k_cache"), kc.ptr(), DType::Bf16, &shape_of("k_cache", bt));
    b2.add(id("v_cache"), vc.ptr(), DType::Bf16, &shape_of("v_cache", bt));
    for (name, o) in OUTPUTS.iter().zip(&outs) {
        b2.add(id(name), o.ptr(), DType::Bf16, &shape_of(name, bt));
    }
    // SAFETY: as above.
    let e = unsafe { p.run(&b2, Stream::DEFAULT) }.and_then(|_| p.synchronize(Stream::DEFAULT)).unwrap_err();
    println!("{e}");
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    // SAFETY: as above.
    unsafe { p.run(&b, Stream::DEFAULT) }.unwrap();
    p.synchronize(Stream::DEFAULT).unwrap();
}

#[test]
fn program_rejects_a_wrong_binding_shape() {
    let Some(drv) = gpu("program_rejects_a_wrong_binding_shape") else { return };
    let ctx = Context::new().unwrap();
    let m = build_mlp(&ctx, DType::F32).unwrap();
    let mut p = program(&m.graph);
    let buf = drv.alloc(1 << 16).unwrap();
    let mut b = DeviceBindings::new();
    let (k, h, n) = (K as i64, HIDDEN as i64, N as i64);
    b.add(m.x, buf.ptr(), DType::F32, &[2, k + 1])
        .add(m.w1, buf.ptr(), DType::F32, &[h, k])
        .add(m.b1, buf.ptr(), DType::F32, &[h])
        .add(m.w2, buf.ptr(), DType::F32, &[n, h])
        .add(m.b2, buf.ptr(), DType::F32, &[n])
        .add(m.y, buf.ptr(), DType::F32, &[2, n]);
    // SAFETY: nothing is launched: weft checks shapes first (and the buffer is large enough anyway).
    let e = unsafe { p.run(&b, Stream::DEFAULT) }.unwrap_err();
    println!("{e}");
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("'x'"), "{e}");
}

/// Runs the f32 MLP for `batch` rows on `p` and checks the result against the arithmetic done here.
fn run_mlp_checked(drv: &Driver, p: &mut Program, m: &Mlp, batch: usize, seed: u64) {
    let d = mlp_data(batch, DType::F32, seed);
    let bufs: Vec<DeviceBuffer> = d.iter().map(|v| drv.upload(v).unwrap()).collect();
    let y_dev = drv.alloc(batch * N * 4).unwrap();
    let mut b = DeviceBindings::new();
    let (bt, k, h, n) = (batch as i64, K as i64, HIDDEN as i64, N as i64);
    b.add(m.x, bufs[0].ptr(), DType::F32, &[bt, k])
        .add(m.w1, bufs[1].ptr(), DType::F32, &[h, k])
        .add(m.b1, bufs[2].ptr(), DType::F32, &[h])
        .add(m.w2, bufs[3].ptr(), DType::F32, &[n, h])
        .add(m.b2, bufs[4].ptr(), DType::F32, &[n])
        .add(m.y, y_dev.ptr(), DType::F32, &[bt, n]);
    // SAFETY: every buffer holds its shape's elements and outlives the synchronize below.
    unsafe { p.run(&b, Stream::DEFAULT) }.unwrap();
    p.synchronize(Stream::DEFAULT).unwrap();
    let mut y = vec![0.0f32; batch * N];
    y_dev.copy_to(&mut y).unwrap();
    assert_close(&format!("gpu y (batch {batch})"), &y, &mlp_expected(&d, batch, DType::F32), 2e-3, 2e-3);
}

/// The program's stats once no specialization compiles in the background any more (or after 300 s).
fn settled_stats(p: &Program) -> ProgramStats {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut s = p.stats().unwrap();
    while s.pending > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        s = p.stats().unwrap();
    }
    s
}

#[test]
fn lazy_program_runs_on_the_generic_kernel_and_reports_stats() {
    let Some(drv) = gpu("lazy_program_runs_on_the_generic_kernel_and_reports_stats") else { return };
    let ctx = Context::new().unwrap();
    let mut m = build_mlp(&ctx, DType::F32).unwrap();
    // Batch 3 runs on the kernel for 4; the generic kernel is the one for 8.
    m.graph.set_symbol_policy("batch", SymbolPolicy::Buckets, &[2, 4]).unwrap();
    let opts = ProgramOptions { device_ordinal: 0, lazy: true, max_loaded_kernels: 4, ..Default::default() };
    let mut p = Program::new(&m.graph, &opts).unwrap();
    let s = p.stats().unwrap();
    println!("fresh program: {s:?}");
    assert_eq!((s.compiles, s.cache_loads, s.evictions, s.generic_runs, s.pending, s.loaded), (0, 0, 0, 0, 0, 0));
    assert!(s.host_jit_ms >= 0.0 && (s.host_jit || (!s.host_jit_cache_hit && s.host_jit_ms == 0.0)), "{s:?}");

    // The kernel for 4 is not loaded: the generic kernel serves the run while it compiles.
    run_mlp_checked(&drv, &mut p, &m, 3, 41);
    let s = p.stats().unwrap();
    assert_eq!((s.generic_runs, s.evictions), (1, 0), "{s:?}");
    assert!(s.compiles + s.cache_loads >= 1 && s.loaded >= 1, "the generic kernel at least: {s:?}");
    let s = settled_stats(&p);
    assert_eq!(s.pending, 0, "the background compile did not finish: {s:?}");
    assert_eq!((s.loaded, s.compiles + s.cache_loads), (2, 2), "generic + the kernel for 4: {s:?}");

    // Now on its own specialization.
    run_mlp_checked(&drv, &mut p, &m, 3, 42);
    assert_eq!(p.stats().unwrap().generic_runs, 1);
}

#[test]
fn max_loaded_kernels_evicts_the_least_recently_used() {
    let Some(drv) = gpu("max_loaded_kernels_evicts_the_least_recently_used") else { return };
    let ctx = Context::new().unwrap();
    let mut m = build_mlp(&ctx, DType::F32).unwrap();
    m.graph.set_symbol_policy("batch", SymbolPolicy::Buckets, &[2, 4]).unwrap();
    let opts = ProgramOptions { device_ordinal: 0, max_loaded_kernels: 1, ..Default::default() };
    let mut p = Program::new(&m.graph, &opts).unwrap();
    // Buckets 2 and 4: the second unloads the first.
    run_mlp_checked(&drv, &mut p, &m, 1, 51);
    run_mlp_checked(&drv, &mut p, &m, 3, 52);
    let s = p.stats().unwrap();
    assert_eq!((s.loaded, s.evictions, s.generic_runs, s.pending), (1, 1, 0, 0), "{s:?}");
    assert_eq!(s.compiles + s.cache_loads, 2, "{s:?}");
}
