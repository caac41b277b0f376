use weft_sys as sys;

use crate::error::{Error, Result, Status};

/// Element types of weft tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bf16,
    F16,
    F32,
    I32,
    I64,
}

impl DType {
    pub fn raw(self) -> sys::weft_dtype {
        match self {
            DType::Bf16 => sys::WEFT_DTYPE_BF16,
            DType::F16 => sys::WEFT_DTYPE_F16,
            DType::F32 => sys::WEFT_DTYPE_F32,
            DType::I32 => sys::WEFT_DTYPE_I32,
            DType::I64 => sys::WEFT_DTYPE_I64,
        }
    }

    pub fn from_raw(d: sys::weft_dtype) -> Option<Self> {
        Some(match d {
            sys::WEFT_DTYPE_BF16 => DType::Bf16,
            sys::WEFT_DTYPE_F16 => DType::F16,
            sys::WEFT_DTYPE_F32 => DType::F32,
            sys::WEFT_DTYPE_I32 => DType::I32,
            sys::WEFT_DTYPE_I64 => DType::I64,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            DType::Bf16 | DType::F16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
        }
    }

    /// weft's name: "bf16", "f16", "f32", "i32", "i64".
    pub fn name(self) -> &'static str {
        unsafe { std::ffi::CStr::from_ptr(sys::weft_dtype_name(self.raw())) }.to_str().unwrap_or("unknown")
    }
}

/// bfloat16 as its bits. Conversions round to nearest even, as weft's reference does.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bf16(pub u16);

impl Bf16 {
    pub fn from_f32(f: f32) -> Self {
        let u = f.to_bits();
        if f.is_nan() {
            return Bf16(((u >> 16) as u16) | 0x40); // keep it a NaN after dropping the low mantissa bits
        }
        Bf16(((u + 0x7fff + ((u >> 16) & 1)) >> 16) as u16)
    }

    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

/// IEEE half precision as its bits. Conversions round to nearest even.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

impl F16 {
    pub fn from_f32(f: f32) -> Self {
        let x = f.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let man = x & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            // Subnormal (or zero) in f16: the value in units of 2^-24.
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let mut r = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let half = 1 << (shift - 1);
            if rem > half || (rem == half && r & 1 == 1) {
                r += 1;
            }
            return F16(sign | r as u16);
        }
        let mut h = ((e as u32) << 10) | (man >> 13);
        let rem = man & 0x1fff;
        if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) {
            h += 1; // a carry into the exponent is the correct rounding, up to infinity
        }
        F16(sign | h as u16)
    }

    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = match exp {
            0 => {
                let v = man as f32 * (1.0 / 16_777_216.0); // man * 2^-24
                return if sign != 0 { -v } else { v };
            }
            31 => sign | 0x7f80_0000 | (man << 13),
            _ => sign | ((exp + 112) << 23) | (man << 13),
        };
        f32::from_bits(bits)
    }
}

/// Rust types that hold one element of a weft dtype, so host slices can be bound safely.
///
/// # Safety
/// `DTYPE.size()` must equal `size_of::<Self>()` and every bit pattern must be a valid value.
pub unsafe trait Element: Copy + 'static {
    const DTYPE: DType;
}
unsafe impl Element for Bf16 {
    const DTYPE: DType = DType::Bf16;
}
unsafe impl Element for F16 {
    const DTYPE: DType = DType::F16;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
unsafe impl Element for i64 {
    const DTYPE: DType = DType::I64;
}

/// One dimension of a shape: a fixed size or the name of a symbol declared on the graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(i64),
    Symbol(String),
}

impl From<i64> for Dim {
    fn from(v: i64) -> Self {
        Dim::Fixed(v)
    }
}
impl From<i32> for Dim {
    fn from(v: i32) -> Self {
        Dim::Fixed(v as i64)
    }
}
impl From<usize> for Dim {
    fn from(v: usize) -> Self {
        Dim::Fixed(v as i64)
    }
}
impl From<&str> for Dim {
    fn from(v: &str) -> Self {
        Dim::Symbol(v.to_owned())
    }
}
impl From<String> for Dim {
    fn from(v: String) -> Self {
        Dim::Symbol(v)
    }
}

/// `dims!["batch", 64]` is `[Dim::from("batch"), Dim::from(64)]`: shapes that mix symbols and sizes.
#[macro_export]
macro_rules! dims {
    ($($d:expr),* $(,)?) => { [$($crate::Dim::from($d)),*] };
}

/// The C form of a shape; holds the symbol strings the `weft_dim`s point into.
pub(crate) struct CDims {
    _names: Vec<std::ffi::CString>,
    pub dims: Vec<sys::weft_dim>,
}

impl CDims {
    pub fn new(dims: &[Dim]) -> Result<Self> {
        let mut names = Vec::new();
        let mut out = Vec::with_capacity(dims.len());
        for d in dims {
            match d {
                Dim::Fixed(n) => out.push(sys::weft_dim { symbol: std::ptr::null(), size: *n }),
                Dim::Symbol(s) => {
                    let c = crate::error::c_string("symbol", s)?;
                    // The CString's heap buffer does not move when the CString is moved into `names`.
                    out.push(sys::weft_dim { symbol: c.as_ptr(), size: 0 });
                    names.push(c);
                }
            }
        }
        Ok(CDims { _names: names, dims: out })
    }

    pub fn rank(&self) -> Result<i32> {
        i32::try_from(self.dims.len()).map_err(|_| Error::invalid("rank does not fit in int32"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// Bound per run, read only.
    Input,
    /// Bound per run, read only, expected to stay the same across runs.
    Weight,
    /// Bound per run, read and written in place (a KV cache).
    State,
    /// Produced by an op, owned by weft.
    Intermediate,
}

impl TensorKind {
    pub fn raw(self) -> sys::weft_tensor_kind {
        match self {
            TensorKind::Input => sys::WEFT_TENSOR_INPUT,
            TensorKind::Weight => sys::WEFT_TENSOR_WEIGHT,
            TensorKind::State => sys::WEFT_TENSOR_STATE,
            TensorKind::Intermediate => sys::WEFT_TENSOR_INTERMEDIATE,
        }
    }

    pub(crate) fn from_raw(k: sys::weft_tensor_kind) -> Result<Self> {
        Ok(match k {
            sys::WEFT_TENSOR_INPUT => TensorKind::Input,
            sys::WEFT_TENSOR_WEIGHT => TensorKind::Weight,
            sys::WEFT_TENSOR_STATE => TensorKind::State,
            sys::WEFT_TENSOR_INTERMEDIATE => TensorKind::Intermediate,
            other => return Err(Error::new(Status::Internal, format!("unknown tensor kind {other}"))),
        })
    }
}

/// A tensor id of one graph (weft rejects it, naming both graphs, when used with another).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tensor(u64);

impl Tensor {
    pub fn raw(self) -> sys::weft_tensor {
        self.0
    }

    /// None for WEFT_TENSOR_NONE.
    pub fn from_raw(t: sys::weft_tensor) -> Option<Self> {
        (t != sys::WEFT_TENSOR_NONE).then_some(Tensor(t))
    }

    pub(crate) fn opt(t: Option<Tensor>) -> sys::weft_tensor {
        t.map_or(sys::WEFT_TENSOR_NONE, |t| t.0)
    }
}

/// A description of a tensor (weft_tensor_info), copied out of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub kind: TensorKind,
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub is_output: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RopeStyle {
    /// Rotate halves (x[i], x[i + d/2]): Llama / Qwen in HF.
    #[default]
    Half,
    /// Rotate pairs (x[2i], x[2i+1]): GPT-J style.
    Interleaved,
}

/// Position scaling of rope; a 0 field takes weft's default (see weft_rope_options).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum RopeScaling {
    #[default]
    None,
    Linear {
        factor: f64,
    },
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position: i64,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RopeOptions {
    pub head_dim: i64,
    /// Base; 0 means 10000.
    pub theta: f64,
    pub style: RopeStyle,
    pub scaling: RopeScaling,
}

impl RopeOptions {
    pub(crate) fn to_c(self) -> sys::weft_rope_options {
        let mut o = sys::weft_rope_options {
            struct_size: std::mem::size_of::<sys::weft_rope_options>(),
            head_dim: self.head_dim,
            theta: self.theta,
            style: match self.style {
                RopeStyle::Half => sys::WEFT_ROPE_HALF,
                RopeStyle::Interleaved => sys::WEFT_ROPE_INTERLEAVED,
            },
            ..Default::default()
        };
        match self.scaling {
            RopeScaling::None => o.scaling = sys::WEFT_ROPE_SCALING_NONE,
            RopeScaling::Linear { factor } => {
                o.scaling = sys::WEFT_ROPE_SCALING_LINEAR;
                o.factor = factor;
            }
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                o.scaling = sys::WEFT_ROPE_SCALING_LLAMA3;
                o.factor = factor;
                o.low_freq_factor = low_freq_factor;
                o.high_freq_factor = high_freq_factor;
                o.original_max_position = original_max_position;
            }
        }
        o
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionOptions {
    pub num_q_heads: i64,
    /// num_q_heads must be a multiple of it (GQA).
    pub num_kv_heads: i64,
    pub head_dim: i64,
    /// 0 means 1/sqrt(head_dim).
    pub scale: f64,
}

impl AttentionOptions {
    pub(crate) fn to_c(self) -> sys::weft_attention_options {
        sys::weft_attention_options {
            struct_size: std::mem::size_of::<sys::weft_attention_options>(),
            num_q_heads: self.num_q_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            scale: self.scale,
        }
    }
}

/// How a program specializes its kernels for a symbol's values (weft_symbol_policy). A kernel compiled for a
/// value U serves any smaller value by masking when the symbol is "maskable" (dim 0 of every tensor it sizes,
/// no op combining values across it: a batch dim, typically).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SymbolPolicy {
    /// BUCKETS (powers of two) when the symbol is maskable, else EXACT.
    #[default]
    Auto,
    /// One kernel per value.
    Exact,
    /// One kernel per bucket; a value runs on the kernel of the first bucket >= it.
    Buckets,
    /// One kernel (compiled at the maximum) for every value: a value never compiles.
    Runtime,
}

impl SymbolPolicy {
    pub fn raw(self) -> sys::weft_symbol_policy {
        match self {
            SymbolPolicy::Auto => sys::WEFT_SYMBOL_AUTO,
            SymbolPolicy::Exact => sys::WEFT_SYMBOL_EXACT,
            SymbolPolicy::Buckets => sys::WEFT_SYMBOL_BUCKETS,
            SymbolPolicy::Runtime => sys::WEFT_SYMBOL_RUNTIME,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Max,
    Mean,
}

impl ReduceKind {
    pub(crate) fn raw(self) -> sys::weft_reduce_kind {
        match self {
            ReduceKind::Sum => sys::WEFT_REDUCE_SUM,
            ReduceKind::Max => sys::WEFT_REDUCE_MAX,
            ReduceKind::Mean => sys::WEFT_REDUCE_MEAN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
        assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
        assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0).to_f32(), 1.0);
        assert_eq!(Bf16::from_f32(1.0 + 3.0 / 256.0).to_f32(), 1.0 + 4.0 / 256.0);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(Bf16::from_f32(f32::INFINITY).to_f32(), f32::INFINITY);
    }

    #[test]
    fn f16_round_trips_and_rounds() {
        for v in [0.0f32, -0.0, 1.0, -1.5, 65504.0, 6.103_515_6e-5, 5.960_464_5e-8, 0.333_251_95] {
            assert_eq!(F16::from_f32(v).to_f32(), v, "{v}");
        }
        assert_eq!(F16::from_f32(1.0).0, 0x3c00);
        assert_eq!(F16::from_f32(65520.0).to_f32(), f32::INFINITY); // rounds up past the largest finite
        assert_eq!(F16::from_f32(2.9e-8).0, 0); // below half the smallest subnormal
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0).to_f32(), 1.0); // a tie goes to even
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
    }
}
