//! Models: a random tiny Llama checkpoint (written by the `weft` CLI named in $WEFT_CLI, or a folder named in
//! $WEFT_MODEL_DIR) generated greedily on the CPU reference.
use std::path::PathBuf;
use std::process::Command;

use weft::{Backend, Context, GenerateRequest, Model, ModelOptions, Status};

/// A model folder, or None after printing why the test skips. The bool says whether to delete it after.
fn checkpoint(test: &str) -> Option<(PathBuf, bool)> {
    if let Some(dir) = std::env::var_os("WEFT_MODEL_DIR") {
        return Some((dir.into(), false));
    }
    let Some(cli) = std::env::var_os("WEFT_CLI") else {
        println!("{test}: skipped: set WEFT_CLI to the weft command (or WEFT_MODEL_DIR to a model folder)");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("weft-rust-{test}-{}", std::process::id()));
    let out = Command::new(&cli).arg("checkpoint").arg("tiny-llama").arg(&dir).output().expect("cannot run $WEFT_CLI");
    assert!(out.status.success(), "weft checkpoint failed: {}", String::from_utf8_lossy(&out.stderr));
    Some((dir, true))
}

#[test]
fn loading_a_missing_folder_names_it() {
    let ctx = Context::new().unwrap();
    let dir = std::env::temp_dir().join("weft-no-such-model-folder");
    let e = Model::load(&ctx, &dir, &ModelOptions { backend: Backend::Reference, ..Default::default() }).unwrap_err();
    println!("{e}");
    assert_ne!(e.status(), Status::Internal);
    assert!(e.message().contains("weft-no-such-model-folder"), "{e}");
}

#[test]
fn greedy_generation_on_the_reference() {
    let Some((dir, cleanup)) = checkpoint("greedy_generation_on_the_reference") else { return };
    let ctx = Context::new().unwrap();
    let opts = ModelOptions { backend: Backend::Reference, max_batch: 2, max_seq: 16, ..Default::default() };
    let mut m = Model::load(&ctx, &dir, &opts).unwrap();
    let info = m.info().unwrap();
    println!("{info:?}");
    assert_eq!(info.backend, Backend::Reference);
    assert_eq!((info.max_batch, info.max_seq), (2, 16));
    assert!(info.layers >= 1 && info.vocab > 0 && info.hidden > 0 && info.weight_bytes > 0, "{info:?}");
    assert!(info.model_type == "llama" || info.model_type == "qwen3", "{info:?}");

    let vocab = info.vocab as usize;
    let (batch, prompt_len, steps) = (2usize, 3usize, 4usize);
    let prompt: Vec<i32> = vec![1, 5, 9, 100, 7, 3];
    let req = GenerateRequest {
        batch: batch as i32,
        prompt_len: prompt_len as i32,
        steps: steps as i32,
        prompt_ids: &prompt,
        want_logits: true,
        ..Default::default()
    };
    let g = m.generate(&req).unwrap();
    assert_eq!(g.tokens.len(), batch * steps);
    let logits = g.logits.as_ref().unwrap();
    // Each token is the first maximum of its step's logits.
    for s in 0..steps {
        for b in 0..batch {
            let row = &logits[(s * batch + b) * vocab..(s * batch + b + 1) * vocab];
            assert!(row.iter().all(|v| v.is_finite()));
            let best = row.iter().enumerate().fold(0, |best, (i, v)| if *v > row[best] { i } else { best });
            assert_eq!(g.tokens[b * steps + s] as usize, best, "step {s} row {b}");
        }
    }
    // Deterministic, and teacher forcing with its own tokens changes nothing.
    assert_eq!(m.generate(&req).unwrap().tokens, g.tokens);
    let forced = GenerateRequest { forced_ids: Some(&g.tokens), want_logits: false, ..req };
    assert_eq!(m.generate(&forced).unwrap().tokens, g.tokens);

    let bad = vec![vocab as i32; batch * prompt_len];
    let e = m.generate(&GenerateRequest { prompt_ids: &bad, ..req }).unwrap_err();
    println!("{e}");
    assert_eq!(e.status(), Status::InvalidArgument);
    let too_many = vec![1; 3 * prompt_len];
    let e = m.generate(&GenerateRequest { batch: 3, prompt_ids: &too_many, ..req }).unwrap_err();
    println!("{e}");
    assert_eq!(e.status(), Status::InvalidArgument);
    // A prompt slice that does not match batch * prompt_len is refused before weft reads it.
    assert_eq!(
        m.generate(&GenerateRequest { prompt_ids: &prompt[..5], ..req }).unwrap_err().status(),
        Status::InvalidArgument
    );

    drop(m);
    if cleanup {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
