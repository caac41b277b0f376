//! Raw declarations of weft's C API, one for one with `include/weft/weft.h` (version 0.1.0).
//!
//! Everything here is `unsafe` to call; the `weft` crate is the safe layer. C enums are declared as
//! `i32` aliases with constants rather than Rust enums, because the library may hand back a value this
//! crate does not know and a Rust enum holding an unlisted value is undefined behaviour.
//! Struct layouts are checked against the C compiler's at build time (see build.rs and the tests below).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub const WEFT_VERSION_MAJOR: c_int = 0;
pub const WEFT_VERSION_MINOR: c_int = 1;
pub const WEFT_VERSION_PATCH: c_int = 0;
pub const WEFT_VERSION: c_int = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH;

pub type weft_status = i32;
pub const WEFT_OK: weft_status = 0;
pub const WEFT_ERROR_INVALID_ARGUMENT: weft_status = 1;
pub const WEFT_ERROR_INVALID_HANDLE: weft_status = 2;
pub const WEFT_ERROR_OUT_OF_MEMORY: weft_status = 3;
pub const WEFT_ERROR_UNSUPPORTED: weft_status = 4;
pub const WEFT_ERROR_COMPILE: weft_status = 5;
pub const WEFT_ERROR_CUDA: weft_status = 6;
pub const WEFT_ERROR_CACHE: weft_status = 7;
pub const WEFT_ERROR_DEADLOCK: weft_status = 8;
pub const WEFT_ERROR_IO: weft_status = 9;
pub const WEFT_ERROR_INTERNAL: weft_status = 10;

pub type weft_dtype = i32;
pub const WEFT_DTYPE_BF16: weft_dtype = 0;
pub const WEFT_DTYPE_F16: weft_dtype = 1;
pub const WEFT_DTYPE_F32: weft_dtype = 2;
pub const WEFT_DTYPE_I32: weft_dtype = 3;
pub const WEFT_DTYPE_I64: weft_dtype = 4;

pub const WEFT_MAX_RANK: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_dim {
    pub symbol: *const c_char,
    pub size: i64,
}

#[repr(C)]
pub struct weft_context {
    _private: [u8; 0],
}
#[repr(C)]
pub struct weft_graph {
    _private: [u8; 0],
}
#[repr(C)]
pub struct weft_program {
    _private: [u8; 0],
}
#[repr(C)]
pub struct weft_model {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_context_options {
    pub struct_size: usize,
    pub reserved: i32,
}

pub type weft_tensor = u64;
pub const WEFT_TENSOR_NONE: weft_tensor = 0;

pub type weft_symbol_policy = i32;
pub const WEFT_SYMBOL_AUTO: weft_symbol_policy = 0;
pub const WEFT_SYMBOL_EXACT: weft_symbol_policy = 1;
pub const WEFT_SYMBOL_BUCKETS: weft_symbol_policy = 2;
pub const WEFT_SYMBOL_RUNTIME: weft_symbol_policy = 3;

pub type weft_tensor_kind = i32;
pub const WEFT_TENSOR_INPUT: weft_tensor_kind = 0;
pub const WEFT_TENSOR_WEIGHT: weft_tensor_kind = 1;
pub const WEFT_TENSOR_STATE: weft_tensor_kind = 2;
pub const WEFT_TENSOR_INTERMEDIATE: weft_tensor_kind = 3;

pub type weft_rope_style = i32;
pub const WEFT_ROPE_HALF: weft_rope_style = 0;
pub const WEFT_ROPE_INTERLEAVED: weft_rope_style = 1;

pub type weft_rope_scaling = i32;
pub const WEFT_ROPE_SCALING_NONE: weft_rope_scaling = 0;
pub const WEFT_ROPE_SCALING_LINEAR: weft_rope_scaling = 1;
pub const WEFT_ROPE_SCALING_LLAMA3: weft_rope_scaling = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_rope_options {
    pub struct_size: usize,
    pub head_dim: i64,
    pub theta: f64,
    pub style: weft_rope_style,
    pub scaling: weft_rope_scaling,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_attention_options {
    pub struct_size: usize,
    pub num_q_heads: i64,
    pub num_kv_heads: i64,
    pub head_dim: i64,
    pub scale: f64,
}

pub type weft_reduce_kind = i32;
pub const WEFT_REDUCE_SUM: weft_reduce_kind = 0;
pub const WEFT_REDUCE_MAX: weft_reduce_kind = 1;
pub const WEFT_REDUCE_MEAN: weft_reduce_kind = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_tensor_info {
    pub struct_size: usize,
    pub name: *const c_char,
    pub kind: weft_tensor_kind,
    pub dtype: weft_dtype,
    pub rank: i32,
    pub dims: [weft_dim; WEFT_MAX_RANK],
    pub is_output: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_tensor_view {
    pub data: *mut c_void,
    pub dtype: weft_dtype,
    pub rank: i32,
    pub shape: *const i64,
    pub strides: *const i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_binding {
    pub tensor: weft_tensor,
    pub value: weft_tensor_view,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_compile_options {
    pub struct_size: usize,
    pub arch: *const c_char,
    pub num_sms: i32,
    pub disable_cache: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_compile_report {
    pub struct_size: usize,
    pub num_tasks: i64,
    pub num_events: i64,
    pub num_queues: i64,
    pub arena_bytes: i64,
    pub cubin_bytes: i64,
    pub total_ms: f64,
    pub lower_ms: f64,
    pub compile_ms: f64,
    pub cache_hit: i32,
    pub key: [c_char; 33],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_program_options {
    pub struct_size: usize,
    pub device_ordinal: i32,
    pub arch: *const c_char,
    pub watchdog_ms: i32,
    pub disable_cache: i32,
    pub max_loaded_kernels: i32,
    pub lazy: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_program_stats {
    pub struct_size: usize,
    pub compiles: i64,
    pub cache_loads: i64,
    pub evictions: i64,
    pub generic_runs: i64,
    pub pending: i64,
    pub loaded: i64,
    pub host_jit: i32,
    pub host_jit_cache_hit: i32,
    pub host_jit_ms: f64,
}

pub type weft_backend = i32;
pub const WEFT_BACKEND_AUTO: weft_backend = 0;
pub const WEFT_BACKEND_GPU: weft_backend = 1;
pub const WEFT_BACKEND_REFERENCE: weft_backend = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_model_options {
    pub struct_size: usize,
    pub backend: weft_backend,
    pub device_ordinal: i32,
    pub max_batch: i32,
    pub max_seq: i32,
    pub watchdog_ms: i32,
    pub disable_cache: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_model_info {
    pub struct_size: usize,
    pub model_type: [c_char; 16],
    pub layers: i32,
    pub hidden: i32,
    pub q_heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub ffn: i32,
    pub vocab: i32,
    pub max_batch: i32,
    pub max_seq: i32,
    pub backend: weft_backend,
    pub device: [c_char; 128],
    pub weight_bytes: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct weft_generate_request {
    pub struct_size: usize,
    pub batch: i32,
    pub prompt_len: i32,
    pub steps: i32,
    pub prompt_ids: *const i32,
    pub forced_ids: *const i32,
    pub multi_step: i32,
    pub out_tokens: *mut i32,
    pub out_logits: *mut f32,
    pub out_step_ms: *mut f32,
    pub on_step: Option<unsafe extern "C" fn(on_step_user: *mut c_void, step: i32, tokens: *const i32, batch: i32) -> i32>,
    pub on_step_user: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct weft_generate_report {
    pub struct_size: usize,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub steps_done: i32,
}

type G = weft_graph;
type T = weft_tensor;

extern "C" {
    pub fn weft_version() -> c_int;
    pub fn weft_version_string() -> *const c_char;
    pub fn weft_status_string(status: weft_status) -> *const c_char;
    pub fn weft_last_error_message() -> *const c_char;
    pub fn weft_dtype_name(dtype: weft_dtype) -> *const c_char;

    pub fn weft_context_create(options: *const weft_context_options, out: *mut *mut weft_context) -> weft_status;
    pub fn weft_context_destroy(context: *mut weft_context);

    pub fn weft_graph_create(context: *mut weft_context, name: *const c_char, out: *mut *mut G) -> weft_status;
    pub fn weft_graph_destroy(graph: *mut G);
    pub fn weft_graph_declare_symbol(graph: *mut G, name: *const c_char, min_value: i64, max_value: i64)
        -> weft_status;
    pub fn weft_graph_set_symbol_policy(
        graph: *mut G,
        name: *const c_char,
        policy: weft_symbol_policy,
        buckets: *const i64,
        num_buckets: i32,
    ) -> weft_status;
    pub fn weft_graph_add_tensor(
        graph: *mut G,
        kind: weft_tensor_kind,
        name: *const c_char,
        dtype: weft_dtype,
        dims: *const weft_dim,
        rank: i32,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_graph_add_op(
        graph: *mut G,
        op: *const c_char,
        inputs: *const T,
        num_inputs: i32,
        attrs_json: *const c_char,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_graph_mark_output(graph: *mut G, tensor: T, name: *const c_char) -> weft_status;
    pub fn weft_graph_validate(graph: *const G) -> weft_status;

    pub fn weft_op_embedding(g: *mut G, table: T, ids: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_rmsnorm(g: *mut G, x: T, weight: T, eps: f32, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_head_rmsnorm(
        g: *mut G,
        x: T,
        weight: T,
        head_dim: i64,
        eps: f32,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_layernorm(
        g: *mut G,
        x: T,
        weight: T,
        bias: T,
        eps: f32,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_linear(
        g: *mut G,
        x: T,
        weight: T,
        bias: T,
        residual: T,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_matmul(g: *mut G, a: T, b: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_add(g: *mut G, a: T, b: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_mul(g: *mut G, a: T, b: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_silu(g: *mut G, x: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_gelu(g: *mut G, x: T, tanh_approximation: c_int, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_silu_mul(g: *mut G, gate: T, up: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_rope(
        g: *mut G,
        x: T,
        positions: T,
        options: *const weft_rope_options,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_attention_decode(
        g: *mut G,
        q: T,
        k_new: T,
        v_new: T,
        k_cache: T,
        v_cache: T,
        positions: T,
        options: *const weft_attention_options,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_softmax(g: *mut G, x: T, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_argmax(g: *mut G, x: T, dtype: weft_dtype, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_reduce(
        g: *mut G,
        x: T,
        kind: weft_reduce_kind,
        axis: i32,
        keepdim: c_int,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_cast(g: *mut G, x: T, dtype: weft_dtype, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_op_reshape(
        g: *mut G,
        x: T,
        dims: *const weft_dim,
        rank: i32,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_slice(
        g: *mut G,
        x: T,
        axis: i32,
        start: i64,
        end: i64,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;
    pub fn weft_op_concat(
        g: *mut G,
        inputs: *const T,
        num_inputs: i32,
        axis: i32,
        name: *const c_char,
        out: *mut T,
    ) -> weft_status;

    pub fn weft_op_count() -> i32;
    pub fn weft_op_name(index: i32) -> *const c_char;
    pub fn weft_graph_tensor_info(graph: *const G, tensor: T, info: *mut weft_tensor_info) -> weft_status;
    pub fn weft_graph_find_tensor(graph: *const G, name: *const c_char, out: *mut T) -> weft_status;
    pub fn weft_graph_num_outputs(graph: *const G, out: *mut i32) -> weft_status;
    pub fn weft_graph_output(graph: *const G, index: i32, out: *mut T) -> weft_status;
    pub fn weft_graph_to_json(graph: *const G, out_json: *mut *const c_char) -> weft_status;
    pub fn weft_graph_to_text(graph: *const G, out_text: *mut *const c_char) -> weft_status;
    pub fn weft_graph_hash(graph: *const G, out: *mut u64) -> weft_status;
    pub fn weft_graph_from_json(context: *mut weft_context, json: *const c_char, out: *mut *mut G) -> weft_status;

    /// `dltensor` points to a DLPack `DLTensor`.
    pub fn weft_tensor_view_from_dlpack(dltensor: *const c_void, out: *mut weft_tensor_view) -> weft_status;
    pub fn weft_graph_run_reference(graph: *const G, bindings: *const weft_binding, num_bindings: i32) -> weft_status;

    pub fn weft_graph_compile(
        graph: *const G,
        options: *const weft_compile_options,
        report: *mut weft_compile_report,
    ) -> weft_status;

    pub fn weft_device_count(out: *mut i32) -> weft_status;
    pub fn weft_program_create(
        graph: *const G,
        options: *const weft_program_options,
        out: *mut *mut weft_program,
    ) -> weft_status;
    pub fn weft_program_destroy(program: *mut weft_program);
    /// `stream` is a CUstream (NULL: the legacy default stream).
    pub fn weft_program_run(
        program: *mut weft_program,
        bindings: *const weft_binding,
        num_bindings: i32,
        stream: *mut c_void,
    ) -> weft_status;
    pub fn weft_program_get_stats(program: *mut weft_program, out: *mut weft_program_stats) -> weft_status;
    pub fn weft_program_synchronize(program: *mut weft_program, stream: *mut c_void) -> weft_status;

    pub fn weft_model_load(
        context: *mut weft_context,
        dir: *const c_char,
        options: *const weft_model_options,
        out: *mut *mut weft_model,
    ) -> weft_status;
    pub fn weft_model_destroy(model: *mut weft_model);
    pub fn weft_model_get_info(model: *const weft_model, info: *mut weft_model_info) -> weft_status;
    pub fn weft_model_compile(model: *mut weft_model, batch: i32, report: *mut weft_compile_report) -> weft_status;
    pub fn weft_model_generate(
        model: *mut weft_model,
        request: *const weft_generate_request,
        report: *mut weft_generate_report,
    ) -> weft_status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    // (name, size or offset as the C compiler laid it out); generated by build.rs from weft.h.
    include!(concat!(env!("OUT_DIR"), "/c_layout.rs"));

    fn rust_layout() -> Vec<(&'static str, usize)> {
        macro_rules! size {
            ($t:ident) => {
                (concat!("sizeof ", stringify!($t)), size_of::<$t>())
            };
        }
        macro_rules! off {
            ($t:ident, $f:ident) => {
                (concat!("offsetof ", stringify!($t), ".", stringify!($f)), offset_of!($t, $f))
            };
        }
        vec![
            size!(weft_dim),
            size!(weft_context_options),
            size!(weft_rope_options),
            off!(weft_rope_options, style),
            off!(weft_rope_options, factor),
            off!(weft_rope_options, original_max_position),
            size!(weft_attention_options),
            off!(weft_attention_options, scale),
            size!(weft_tensor_info),
            off!(weft_tensor_info, dims),
            off!(weft_tensor_info, is_output),
            size!(weft_tensor_view),
            off!(weft_tensor_view, shape),
            size!(weft_binding),
            off!(weft_binding, value),
            size!(weft_compile_options),
            off!(weft_compile_options, disable_cache),
            size!(weft_compile_report),
            off!(weft_compile_report, cache_hit),
            off!(weft_compile_report, key),
            size!(weft_program_options),
            off!(weft_program_options, arch),
            off!(weft_program_options, disable_cache),
            off!(weft_program_options, max_loaded_kernels),
            off!(weft_program_options, lazy),
            size!(weft_program_stats),
            off!(weft_program_stats, compiles),
            off!(weft_program_stats, cache_loads),
            off!(weft_program_stats, evictions),
            off!(weft_program_stats, generic_runs),
            off!(weft_program_stats, pending),
            off!(weft_program_stats, loaded),
            off!(weft_program_stats, host_jit),
            off!(weft_program_stats, host_jit_cache_hit),
            off!(weft_program_stats, host_jit_ms),
            size!(weft_model_options),
            off!(weft_model_options, disable_cache),
            size!(weft_model_info),
            off!(weft_model_info, device),
            off!(weft_model_info, weight_bytes),
            size!(weft_generate_request),
            off!(weft_generate_request, prompt_ids),
            off!(weft_generate_request, multi_step),
            off!(weft_generate_request, out_step_ms),
            off!(weft_generate_request, on_step),
            off!(weft_generate_request, on_step_user),
            size!(weft_generate_report),
            off!(weft_generate_report, steps_done),
            ("sizeof weft_tensor", size_of::<weft_tensor>()),
            ("sizeof weft_status", size_of::<weft_status>()),
        ]
    }

    #[test]
    fn struct_layouts_match_the_c_header() {
        if C_LAYOUT.is_empty() {
            println!("skipped: build.rs found no C compiler to lay out weft.h ({})", C_LAYOUT_NOTE);
            return;
        }
        let c: std::collections::HashMap<_, _> = C_LAYOUT.iter().copied().collect();
        let mut checked = 0;
        for (name, rust) in rust_layout() {
            let c_value = *c.get(name).unwrap_or_else(|| panic!("build.rs did not measure {name}"));
            assert_eq!(rust, c_value, "{name}: Rust {rust}, C {c_value}");
            checked += 1;
        }
        assert_eq!(checked, C_LAYOUT.len(), "build.rs measured something this test does not check");
    }

    #[test]
    fn header_and_library_versions_agree() {
        assert_eq!(unsafe { weft_version() }, WEFT_VERSION);
        let s = unsafe { std::ffi::CStr::from_ptr(weft_version_string()) };
        assert_eq!(s.to_str().unwrap(), format!("{WEFT_VERSION_MAJOR}.{WEFT_VERSION_MINOR}.{WEFT_VERSION_PATCH}"));
    }

    #[test]
    fn enum_values_match_the_library_names() {
        let name = |s| unsafe { std::ffi::CStr::from_ptr(weft_status_string(s)) }.to_str().unwrap().to_owned();
        assert_eq!(name(WEFT_OK), "WEFT_OK");
        assert_eq!(name(WEFT_ERROR_INVALID_HANDLE), "WEFT_ERROR_INVALID_HANDLE");
        assert_eq!(name(WEFT_ERROR_INTERNAL), "WEFT_ERROR_INTERNAL");
        let dt = |d| unsafe { std::ffi::CStr::from_ptr(weft_dtype_name(d)) }.to_str().unwrap().to_owned();
        let names: Vec<_> =
            [WEFT_DTYPE_BF16, WEFT_DTYPE_F16, WEFT_DTYPE_F32, WEFT_DTYPE_I32, WEFT_DTYPE_I64].map(dt).into();
        assert_eq!(names, ["bf16", "f16", "f32", "i32", "i64"]);
    }

    #[test]
    fn symbol_policies_are_accepted_and_one_past_runtime_is_refused() {
        let mut ctx = std::ptr::null_mut();
        let mut g = std::ptr::null_mut();
        unsafe {
            assert_eq!(weft_context_create(std::ptr::null(), &mut ctx), WEFT_OK);
            assert_eq!(weft_graph_create(ctx, std::ptr::null(), &mut g), WEFT_OK);
            assert_eq!(weft_graph_declare_symbol(g, c"n".as_ptr(), 1, 64), WEFT_OK);
            for p in [WEFT_SYMBOL_AUTO, WEFT_SYMBOL_EXACT, WEFT_SYMBOL_BUCKETS, WEFT_SYMBOL_RUNTIME] {
                assert_eq!(weft_graph_set_symbol_policy(g, c"n".as_ptr(), p, std::ptr::null(), 0), WEFT_OK);
            }
            let buckets = [4i64, 16];
            let s = weft_graph_set_symbol_policy(g, c"n".as_ptr(), WEFT_SYMBOL_BUCKETS, buckets.as_ptr(), 2);
            assert_eq!(s, WEFT_OK);
            let s = weft_graph_set_symbol_policy(g, c"n".as_ptr(), WEFT_SYMBOL_RUNTIME + 1, std::ptr::null(), 0);
            assert_eq!(s, WEFT_ERROR_INVALID_ARGUMENT);
            let msg = std::ffi::CStr::from_ptr(weft_last_error_message()).to_str().unwrap().to_owned();
            assert!(msg.contains("AUTO, EXACT, BUCKETS or RUNTIME"), "{msg}");
            weft_graph_destroy(g);
            weft_context_destroy(ctx);
        }
    }
}
