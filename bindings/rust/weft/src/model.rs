use std::path::Path;
use std::ptr::{self, NonNull};

use weft_sys as sys;

use crate::error::{c_string, check, Error, Result, Status};
use crate::graph::Context;
use crate::program::{fixed_string, CompileReport};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The GPU when one is usable, else the CPU reference.
    #[default]
    Auto,
    Gpu,
    /// The CPU reference interpreter (slow; for small models and for checking).
    Reference,
}

impl Backend {
    fn raw(self) -> sys::weft_backend {
        match self {
            Backend::Auto => sys::WEFT_BACKEND_AUTO,
            Backend::Gpu => sys::WEFT_BACKEND_GPU,
            Backend::Reference => sys::WEFT_BACKEND_REFERENCE,
        }
    }
}

/// Options of `Model::load` (weft_model_options); 0 fields take weft's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelOptions {
    pub backend: Backend,
    pub device_ordinal: i32,
    pub max_batch: i32,
    pub max_seq: i32,
    pub watchdog_ms: i32,
    pub disable_cache: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    pub model_type: String,
    pub layers: i32,
    pub hidden: i32,
    pub q_heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub ffn: i32,
    pub vocab: i32,
    pub max_batch: i32,
    pub max_seq: i32,
    /// Gpu or Reference, never Auto.
    pub backend: Backend,
    pub device: String,
    pub weight_bytes: i64,
}

/// One greedy generation: `prompt_ids` holds `batch` rows of `prompt_len` tokens.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenerateRequest<'a> {
    pub batch: i32,
    pub prompt_len: i32,
    pub steps: i32,
    pub prompt_ids: &'a [i32],
    /// [batch][steps] teacher-forced tokens (step j >= 1 consumes forced[b][j-1]).
    pub forced_ids: Option<&'a [i32]>,
    /// Every step in one launch, argmax fed back on the device (GPU; not with forced_ids or logits).
    pub multi_step: bool,
    pub want_logits: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Generation {
    /// [batch][steps]
    pub tokens: Vec<i32>,
    /// [steps][batch][vocab] when asked for.
    pub logits: Option<Vec<f32>>,
    /// [steps]
    pub step_ms: Vec<f32>,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

/// A Hugging Face Llama / Qwen3 folder loaded for greedy generation (weft_model).
#[derive(Debug)]
pub struct Model {
    raw: NonNull<sys::weft_model>,
}

// weft serializes generation per model internally.
unsafe impl Send for Model {}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::weft_model_destroy(self.raw.as_ptr()) }
    }
}

fn count(what: &str, v: i32) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::invalid(format!("{what} {v} is negative")))
}

impl Model {
    pub fn load(context: &Context, dir: &Path, options: &ModelOptions) -> Result<Self> {
        let dir = dir.to_str().ok_or_else(|| Error::invalid(format!("path {dir:?} is not UTF-8")))?;
        let dir = c_string("model folder", dir)?;
        let o = sys::weft_model_options {
            struct_size: std::mem::size_of::<sys::weft_model_options>(),
            backend: options.backend.raw(),
            device_ordinal: options.device_ordinal,
            max_batch: options.max_batch,
            max_seq: options.max_seq,
            watchdog_ms: options.watchdog_ms,
            disable_cache: options.disable_cache as i32,
        };
        let mut raw = ptr::null_mut();
        check(unsafe { sys::weft_model_load(context.as_raw(), dir.as_ptr(), &o, &mut raw) })?;
        Ok(Model { raw: NonNull::new(raw).expect("weft_model_load returned OK and NULL") })
    }

    pub fn info(&self) -> Result<ModelInfo> {
        // SAFETY: all-zero is a valid weft_model_info.
        let mut i: sys::weft_model_info = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<sys::weft_model_info>();
        check(unsafe { sys::weft_model_get_info(self.raw.as_ptr(), &mut i) })?;
        Ok(ModelInfo {
            model_type: fixed_string(&i.model_type),
            layers: i.layers,
            hidden: i.hidden,
            q_heads: i.q_heads,
            kv_heads: i.kv_heads,
            head_dim: i.head_dim,
            ffn: i.ffn,
            vocab: i.vocab,
            max_batch: i.max_batch,
            max_seq: i.max_seq,
            backend: match i.backend {
                sys::WEFT_BACKEND_GPU => Backend::Gpu,
                sys::WEFT_BACKEND_REFERENCE => Backend::Reference,
                other => return Err(Error::new(Status::Internal, format!("model backend {other}"))),
            },
            device: fixed_string(&i.device),
            weight_bytes: i.weight_bytes,
        })
    }

    /// Compiles (or loads from the cache) the megakernel for `batch` rows.
    pub fn compile(&mut self, batch: i32) -> Result<CompileReport> {
        let mut r = CompileReport::raw_zeroed();
        check(unsafe { sys::weft_model_compile(self.raw.as_ptr(), batch, &mut r) })?;
        Ok(CompileReport::from_c(&r))
    }

    pub fn generate(&mut self, req: &GenerateRequest<'_>) -> Result<Generation> {
        let (batch, prompt_len, steps) =
            (count("batch", req.batch)?, count("prompt_len", req.prompt_len)?, count("steps", req.steps)?);
        // Sizes are checked here because weft reads and writes the buffers by the request's counts.
        if req.prompt_ids.len() != batch * prompt_len {
            return Err(Error::invalid(format!(
                "prompt_ids holds {} tokens, batch * prompt_len is {}",
                req.prompt_ids.len(),
                batch * prompt_len
            )));
        }
        if let Some(f) = req.forced_ids {
            if f.len() != batch * steps {
                return Err(Error::invalid(format!(
                    "forced_ids holds {} tokens, batch * steps is {}",
                    f.len(),
                    batch * steps
                )));
            }
        }
        let vocab = count("vocab", self.info()?.vocab)?;
        let mut g = Generation {
            tokens: vec![0; batch * steps],
            logits: req.want_logits.then(|| vec![0.0; steps * batch * vocab]),
            step_ms: vec![0.0; steps],
            ..Default::default()
        };
        let r = sys::weft_generate_request {
            struct_size: std::mem::size_of::<sys::weft_generate_request>(),
            batch: req.batch,
            prompt_len: req.prompt_len,
            steps: req.steps,
            prompt_ids: req.prompt_ids.as_ptr(),
            forced_ids: req.forced_ids.map_or(ptr::null(), |f| f.as_ptr()),
            multi_step: req.multi_step as i32,
            out_tokens: g.tokens.as_mut_ptr(),
            out_logits: g.logits.as_mut().map_or(ptr::null_mut(), |l| l.as_mut_ptr()),
            out_step_ms: g.step_ms.as_mut_ptr(),
            on_step: None,
            on_step_user: ptr::null_mut(),
        };
        let mut rep = sys::weft_generate_report {
            struct_size: std::mem::size_of::<sys::weft_generate_report>(),
            ..Default::default()
        };
        check(unsafe { sys::weft_model_generate(self.raw.as_ptr(), &r, &mut rep) })?;
        g.prefill_ms = rep.prefill_ms;
        g.decode_ms = rep.decode_ms;
        Ok(g)
    }
}
