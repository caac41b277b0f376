use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use weft_sys as sys;

use crate::bindings::HostBindings;
use crate::error::{c_name, c_string, check, owned, ptr_or_null, Error, Result, Status};
use crate::program::{CompileOptions, CompileReport};
use crate::types::*;

/// A weft context (weft_context). Graphs keep their context alive, so it may be dropped before them.
#[derive(Debug)]
pub struct Context {
    raw: NonNull<sys::weft_context>,
}

// weft_context_create/destroy are thread-safe and a context has no other operations.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    pub fn new() -> Result<Self> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::weft_context_create(ptr::null(), &mut raw) })?;
        Ok(Context { raw: NonNull::new(raw).expect("weft_context_create returned OK and NULL") })
    }

    pub fn as_raw(&self) -> *mut sys::weft_context {
        self.raw.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe { sys::weft_context_destroy(self.raw.as_ptr()) }
    }
}

/// A tensor graph (weft_graph). Methods that modify it take `&mut self`; reading it (queries, reference runs,
/// serialization) may happen from several threads at once, as weft.h allows.
#[derive(Debug)]
pub struct Graph {
    raw: NonNull<sys::weft_graph>,
}

unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        unsafe { sys::weft_graph_destroy(self.raw.as_ptr()) }
    }
}

impl Graph {
    /// An empty graph; `name` labels it in messages and dumps ("" for none).
    pub fn new(context: &Context, name: &str) -> Result<Self> {
        let name = c_name(name)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::weft_graph_create(context.as_raw(), ptr_or_null(&name), &mut raw) })?;
        Ok(Graph { raw: NonNull::new(raw).expect("weft_graph_create returned OK and NULL") })
    }

    /// Reads canonical JSON (as `to_json` writes it) and validates the graph.
    pub fn from_json(context: &Context, json: &str) -> Result<Self> {
        let json = c_string("JSON document", json)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::weft_graph_from_json(context.as_raw(), json.as_ptr(), &mut raw) })?;
        Ok(Graph { raw: NonNull::new(raw).expect("weft_graph_from_json returned OK and NULL") })
    }

    pub fn as_raw(&self) -> *mut sys::weft_graph {
        self.raw.as_ptr()
    }

    fn g(&self) -> *mut sys::weft_graph {
        self.raw.as_ptr()
    }

    /// Declares symbol `name` taking values in [min_value, max_value].
    pub fn declare_symbol(&mut self, name: &str, min_value: i64, max_value: i64) -> Result<()> {
        let name = c_string("symbol", name)?;
        check(unsafe { sys::weft_graph_declare_symbol(self.g(), name.as_ptr(), min_value, max_value) })
    }

    /// How programs specialize for symbol `name`. With `SymbolPolicy::Buckets`, `buckets` holds ascending upper
    /// bounds within the symbol's range (its maximum is added when missing); empty means powers of two. Other
    /// policies take no buckets. Saved in the JSON; not part of the hash.
    pub fn set_symbol_policy(&mut self, name: &str, policy: SymbolPolicy, buckets: &[i64]) -> Result<()> {
        let name = c_string("symbol", name)?;
        let n = i32::try_from(buckets.len()).map_err(|_| Error::invalid("too many buckets"))?;
        let ptr = if buckets.is_empty() { ptr::null() } else { buckets.as_ptr() };
        check(unsafe { sys::weft_graph_set_symbol_policy(self.g(), name.as_ptr(), policy.raw(), ptr, n) })
    }

    pub fn add_tensor(&mut self, kind: TensorKind, name: &str, dtype: DType, dims: &[Dim]) -> Result<Tensor> {
        let name = c_string("tensor name", name)?;
        let d = CDims::new(dims)?;
        let rank = d.rank()?;
        self.result(|g, out| unsafe {
            sys::weft_graph_add_tensor(g, kind.raw(), name.as_ptr(), dtype.raw(), d.dims.as_ptr(), rank, out)
        })
    }

    pub fn input(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> Result<Tensor> {
        self.add_tensor(TensorKind::Input, name, dtype, dims)
    }
    pub fn weight(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> Result<Tensor> {
        self.add_tensor(TensorKind::Weight, name, dtype, dims)
    }
    pub fn state(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> Result<Tensor> {
        self.add_tensor(TensorKind::State, name, dtype, dims)
    }

    // Runs a call that writes a tensor id to its out-parameter.
    fn result(
        &mut self,
        f: impl FnOnce(*mut sys::weft_graph, *mut sys::weft_tensor) -> sys::weft_status,
    ) -> Result<Tensor> {
        let mut out = sys::WEFT_TENSOR_NONE;
        check(f(self.g(), &mut out))?;
        Tensor::from_raw(out).ok_or_else(|| Error::new(Status::Internal, "weft returned OK and no tensor"))
    }

    // A typed op helper: `f` gets the graph, the name (NULL for a generated one) and the out-parameter.
    fn op_with(
        &mut self,
        name: &str,
        f: impl FnOnce(*mut sys::weft_graph, *const c_char, *mut sys::weft_tensor) -> sys::weft_status,
    ) -> Result<Tensor> {
        let name = c_name(name)?;
        self.result(|g, out| f(g, ptr_or_null(&name), out))
    }

    /// Any op of the table by name; `attrs_json` is a JSON object ("" for all defaults).
    pub fn op(&mut self, op: &str, inputs: &[Tensor], attrs_json: &str, name: &str) -> Result<Tensor> {
        let op = c_string("op", op)?;
        let attrs = c_name(attrs_json)?;
        let ids: Vec<_> = inputs.iter().map(|t| t.raw()).collect();
        let n = i32::try_from(ids.len()).map_err(|_| Error::invalid("too many inputs"))?;
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_graph_add_op(g, op.as_ptr(), ids.as_ptr(), n, ptr_or_null(&attrs), nm, out)
        })
    }

    pub fn embedding(&mut self, table: Tensor, ids: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_embedding(g, table.raw(), ids.raw(), nm, out) })
    }
    pub fn rmsnorm(&mut self, x: Tensor, weight: Tensor, eps: f32, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_rmsnorm(g, x.raw(), weight.raw(), eps, nm, out) })
    }
    pub fn head_rmsnorm(&mut self, x: Tensor, weight: Tensor, head_dim: i64, eps: f32, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_op_head_rmsnorm(g, x.raw(), weight.raw(), head_dim, eps, nm, out)
        })
    }
    pub fn layernorm(
        &mut self,
        x: Tensor,
        weight: Tensor,
        bias: Option<Tensor>,
        eps: f32,
        name: &str,
    ) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_op_layernorm(g, x.raw(), weight.raw(), Tensor::opt(bias), eps, nm, out)
        })
    }
    /// x·weightᵀ + bias + residual.
    pub fn linear(
        &mut self,
        x: Tensor,
        weight: Tensor,
        bias: Option<Tensor>,
        residual: Option<Tensor>,
        name: &str,
    ) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_op_linear(g, x.raw(), weight.raw(), Tensor::opt(bias), Tensor::opt(residual), nm, out)
        })
    }
    pub fn matmul(&mut self, a: Tensor, b: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_matmul(g, a.raw(), b.raw(), nm, out) })
    }
    pub fn add(&mut self, a: Tensor, b: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_add(g, a.raw(), b.raw(), nm, out) })
    }
    pub fn mul(&mut self, a: Tensor, b: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_mul(g, a.raw(), b.raw(), nm, out) })
    }
    pub fn silu(&mut self, x: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_silu(g, x.raw(), nm, out) })
    }
    pub fn gelu(&mut self, x: Tensor, tanh_approximation: bool, name: &str) -> Result<Tensor> {
        let t = tanh_approximation as i32;
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_gelu(g, x.raw(), t, nm, out) })
    }
    /// silu(gate) * up; with `up` None, gate holds [gate | up] in its last dim.
    pub fn silu_mul(&mut self, gate: Tensor, up: Option<Tensor>, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_silu_mul(g, gate.raw(), Tensor::opt(up), nm, out) })
    }
    pub fn rope(&mut self, x: Tensor, positions: Tensor, options: &RopeOptions, name: &str) -> Result<Tensor> {
        let o = options.to_c();
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_rope(g, x.raw(), positions.raw(), &o, nm, out) })
    }
    /// One decode step of attention; writes k_new/v_new into the STATE caches at `positions`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode(
        &mut self,
        q: Tensor,
        k_new: Tensor,
        v_new: Tensor,
        k_cache: Tensor,
        v_cache: Tensor,
        positions: Tensor,
        options: &AttentionOptions,
        name: &str,
    ) -> Result<Tensor> {
        let o = options.to_c();
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_op_attention_decode(
                g,
                q.raw(),
                k_new.raw(),
                v_new.raw(),
                k_cache.raw(),
                v_cache.raw(),
                positions.raw(),
                &o,
                nm,
                out,
            )
        })
    }
    pub fn softmax(&mut self, x: Tensor, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_softmax(g, x.raw(), nm, out) })
    }
    /// Index of the first maximum of the last dim, as `dtype` (I32 or I64).
    pub fn argmax(&mut self, x: Tensor, dtype: DType, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_argmax(g, x.raw(), dtype.raw(), nm, out) })
    }
    pub fn reduce(&mut self, x: Tensor, kind: ReduceKind, axis: i32, keepdim: bool, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe {
            sys::weft_op_reduce(g, x.raw(), kind.raw(), axis, keepdim as i32, nm, out)
        })
    }
    pub fn cast(&mut self, x: Tensor, dtype: DType, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_cast(g, x.raw(), dtype.raw(), nm, out) })
    }
    pub fn reshape(&mut self, x: Tensor, dims: &[Dim], name: &str) -> Result<Tensor> {
        let d = CDims::new(dims)?;
        let rank = d.rank()?;
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_reshape(g, x.raw(), d.dims.as_ptr(), rank, nm, out) })
    }
    /// Elements [start, end) of `axis` (negative counts from the end).
    pub fn slice(&mut self, x: Tensor, axis: i32, start: i64, end: i64, name: &str) -> Result<Tensor> {
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_slice(g, x.raw(), axis, start, end, nm, out) })
    }
    pub fn concat(&mut self, inputs: &[Tensor], axis: i32, name: &str) -> Result<Tensor> {
        let ids: Vec<_> = inputs.iter().map(|t| t.raw()).collect();
        let n = i32::try_from(ids.len()).map_err(|_| Error::invalid("too many inputs"))?;
        self.op_with(name, |g, nm, out| unsafe { sys::weft_op_concat(g, ids.as_ptr(), n, axis, nm, out) })
    }

    /// Marks `tensor` as an output ("" keeps its name).
    pub fn mark_output(&mut self, tensor: Tensor, name: &str) -> Result<()> {
        let name = c_name(name)?;
        check(unsafe { sys::weft_graph_mark_output(self.g(), tensor.raw(), ptr_or_null(&name)) })
    }

    pub fn validate(&self) -> Result<()> {
        check(unsafe { sys::weft_graph_validate(self.g()) })
    }

    pub fn tensor_info(&self, tensor: Tensor) -> Result<TensorInfo> {
        // SAFETY: all-zero is a valid weft_tensor_info (null pointers, zero integers).
        let mut i: sys::weft_tensor_info = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<sys::weft_tensor_info>();
        check(unsafe { sys::weft_graph_tensor_info(self.g(), tensor.raw(), &mut i) })?;
        let rank = usize::try_from(i.rank).ok().filter(|&r| r <= sys::WEFT_MAX_RANK);
        let rank = rank.ok_or_else(|| Error::new(Status::Internal, format!("tensor rank {}", i.rank)))?;
        let dims = i.dims[..rank]
            .iter()
            .map(|d| if d.symbol.is_null() { Dim::Fixed(d.size) } else { Dim::Symbol(unsafe { owned(d.symbol) }) })
            .collect();
        Ok(TensorInfo {
            name: unsafe { owned(i.name) },
            kind: TensorKind::from_raw(i.kind)?,
            dtype: DType::from_raw(i.dtype)
                .ok_or_else(|| Error::new(Status::Internal, format!("unknown dtype {}", i.dtype)))?,
            dims,
            is_output: i.is_output != 0,
        })
    }

    pub fn find_tensor(&self, name: &str) -> Result<Tensor> {
        let name = c_string("tensor name", name)?;
        let mut out = sys::WEFT_TENSOR_NONE;
        check(unsafe { sys::weft_graph_find_tensor(self.g(), name.as_ptr(), &mut out) })?;
        Tensor::from_raw(out).ok_or_else(|| Error::new(Status::Internal, "weft found no tensor and returned OK"))
    }

    /// The outputs in marking order.
    pub fn outputs(&self) -> Result<Vec<Tensor>> {
        let mut n = 0i32;
        check(unsafe { sys::weft_graph_num_outputs(self.g(), &mut n) })?;
        (0..n)
            .map(|i| {
                let mut t = sys::WEFT_TENSOR_NONE;
                check(unsafe { sys::weft_graph_output(self.g(), i, &mut t) })?;
                Tensor::from_raw(t).ok_or_else(|| Error::new(Status::Internal, "output without a tensor"))
            })
            .collect()
    }

    /// Canonical JSON (stable across runs and processes).
    pub fn to_json(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::weft_graph_to_json(self.g(), &mut s) })?;
        // Copied at once: the pointer lives only until the graph changes.
        Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    /// A readable listing (symbols, tensors, ops).
    pub fn to_text(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::weft_graph_to_text(self.g(), &mut s) })?;
        Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    /// XXH3-128 of the structure (names left out), as `(high << 64) | low`.
    pub fn hash(&self) -> Result<u128> {
        let mut h = [0u64; 2];
        check(unsafe { sys::weft_graph_hash(self.g(), h.as_mut_ptr()) })?;
        Ok(((h[1] as u128) << 64) | h[0] as u128)
    }

    /// Runs the CPU reference interpreter: outputs and STATE tensors are written through `bindings`.
    pub fn run_reference(&self, bindings: &HostBindings<'_>) -> Result<()> {
        bindings.check_writes(self)?;
        let raw = bindings.to_c();
        let n = i32::try_from(raw.len()).map_err(|_| Error::invalid("too many bindings"))?;
        check(unsafe { sys::weft_graph_run_reference(self.g(), raw.as_ptr(), n) })
    }

    /// Compiles the megakernel cubin for every symbol at its maximum (no GPU needed).
    pub fn compile(&self, options: &CompileOptions) -> Result<CompileReport> {
        let arch = options.arch.as_deref().map(|a| c_string("arch", a)).transpose()?;
        let o = sys::weft_compile_options {
            struct_size: std::mem::size_of::<sys::weft_compile_options>(),
            arch: ptr_or_null(&arch),
            num_sms: options.num_sms,
            disable_cache: options.disable_cache as i32,
        };
        let mut r = CompileReport::raw_zeroed();
        check(unsafe { sys::weft_graph_compile(self.g(), &o, &mut r) })?;
        Ok(CompileReport::from_c(&r))
    }
}

/// The names of every op in weft's op table.
pub fn op_names() -> Vec<String> {
    let n = unsafe { sys::weft_op_count() };
    (0..n).map(|i| unsafe { owned(sys::weft_op_name(i)) }).collect()
}
