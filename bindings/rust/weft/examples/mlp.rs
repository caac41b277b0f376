//! A two-layer MLP (linear -> silu -> linear) with a symbolic batch: built, printed, run on the CPU
//! reference, compiled to a cubin (no GPU needed), and run on the GPU when there is one.
//! `cargo run --example mlp` (with WEFT_LIB_DIR at build time and libweft.so on LD_LIBRARY_PATH).
use weft::cuda::Driver;
use weft::{
    dims, CompileOptions, Context, DType, DeviceBindings, Graph, HostBindings, Program, ProgramOptions, Stream,
};

const BATCH: usize = 4;
const D_IN: usize = 64;
const D_HIDDEN: usize = 128;
const D_OUT: usize = 32;

// Deterministic values in [-scale, scale) (the LCG of samples/mlp.c).
fn fill(n: usize, mut seed: u64, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            scale * ((seed >> 40) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0)
        })
        .collect()
}

fn main() -> weft::Result<()> {
    println!("weft {}", weft::version_string());
    let ctx = Context::new()?;
    let mut g = Graph::new(&ctx, "mlp")?;
    g.declare_symbol("batch", 1, 64)?;
    let x = g.input("x", DType::F32, &dims!["batch", D_IN])?;
    let w1 = g.weight("w1", DType::F32, &dims![D_HIDDEN, D_IN])?;
    let b1 = g.weight("b1", DType::F32, &dims![D_HIDDEN])?;
    let w2 = g.weight("w2", DType::F32, &dims![D_OUT, D_HIDDEN])?;
    let b2 = g.weight("b2", DType::F32, &dims![D_OUT])?;
    let h = g.linear(x, w1, Some(b1), None, "h")?;
    let a = g.silu(h, "a")?;
    let y = g.linear(a, w2, Some(b2), None, "y")?;
    g.mark_output(y, "")?;
    print!("{}", g.to_text()?);

    let xv = fill(BATCH * D_IN, 1, 1.0);
    let (w1v, b1v) = (fill(D_HIDDEN * D_IN, 2, 0.125), fill(D_HIDDEN, 3, 0.1));
    let (w2v, b2v) = (fill(D_OUT * D_HIDDEN, 4, 0.09), fill(D_OUT, 5, 0.1));
    let mut yv = vec![0.0f32; BATCH * D_OUT];
    let shapes: [&[i64]; 6] = [
        &[BATCH as i64, D_IN as i64],
        &[D_HIDDEN as i64, D_IN as i64],
        &[D_HIDDEN as i64],
        &[D_OUT as i64, D_HIDDEN as i64],
        &[D_OUT as i64],
        &[BATCH as i64, D_OUT as i64],
    ];
    let mut b = HostBindings::new();
    b.read(x, &xv, shapes[0])?.read(w1, &w1v, shapes[1])?.read(b1, &b1v, shapes[2])?;
    b.read(w2, &w2v, shapes[3])?.read(b2, &b2v, shapes[4])?.write(y, &mut yv, shapes[5])?;
    g.run_reference(&b)?;
    drop(b);
    let sum: f32 = yv.iter().sum();
    println!("reference: y [{BATCH}, {D_OUT}] sum {sum:.6}  y[0][0..4] {:?}", &yv[..4]);

    let r = g.compile(&CompileOptions { disable_cache: true, ..Default::default() })?;
    println!(
        "compiled for sm_90a: {} tasks, {} queues, cubin {} bytes, {:.1} ms",
        r.num_tasks, r.num_queues, r.cubin_bytes, r.total_ms
    );

    match weft::device_count() {
        Ok(n) if n > 0 => {
            let drv = Driver::open(0)?;
            let ins = [&xv, &w1v, &b1v, &w2v, &b2v]
                .iter()
                .map(|v| drv.upload(v.as_slice()))
                .collect::<weft::Result<Vec<_>>>()?;
            let out = drv.alloc(yv.len() * 4)?;
            let mut db = DeviceBindings::new();
            for ((t, buf), shape) in [x, w1, b1, w2, b2].iter().zip(&ins).zip(shapes) {
                db.add(*t, buf.ptr(), DType::F32, shape);
            }
            db.add(y, out.ptr(), DType::F32, shapes[5]);
            let mut p = Program::new(&g, &ProgramOptions { device_ordinal: 0, ..Default::default() })?;
            // SAFETY: the buffers hold the bound shapes and live until synchronize returns.
            unsafe { p.run(&db, Stream::DEFAULT)? };
            p.synchronize(Stream::DEFAULT)?;
            let mut gpu = vec![0.0f32; yv.len()];
            out.copy_to(&mut gpu)?;
            let max_diff = gpu.iter().zip(&yv).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            println!("gpu: max |gpu - reference| = {max_diff:e}");
        }
        Ok(_) => println!("gpu: skipped: no GPU: weft_device_count reports 0 devices"),
        Err(e) => println!("gpu: skipped: no GPU: {e}"),
    }
    Ok(())
}
