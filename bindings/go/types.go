package weft

/*
#include "weft/weft.h"
*/
import "C"

import (
	"math"
	"strconv"
)

// DType is a weft_dtype.
type DType int32

const (
	DTypeBF16 DType = C.WEFT_DTYPE_BF16
	DTypeF16  DType = C.WEFT_DTYPE_F16
	DTypeF32  DType = C.WEFT_DTYPE_F32
	DTypeI32  DType = C.WEFT_DTYPE_I32
	DTypeI64  DType = C.WEFT_DTYPE_I64
)

// String is weft's name: "bf16", "f16", "f32", "i32", "i64" (or "unknown").
func (d DType) String() string { return C.GoString(C.weft_dtype_name(C.weft_dtype(d))) }

// Size is the element size in bytes (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case DTypeBF16, DTypeF16:
		return 2
	case DTypeF32, DTypeI32:
		return 4
	case DTypeI64:
		return 8
	}
	return 0
}

// BF16 is a bfloat16 as its bits.
type BF16 uint16

// BF16FromFloat32 rounds to nearest even, as weft's reference does.
func BF16FromFloat32(f float32) BF16 {
	u := math.Float32bits(f)
	if f != f { // NaN: keep it a NaN after dropping the low mantissa bits
		return BF16(u>>16) | 0x40
	}
	return BF16((u + 0x7fff + ((u >> 16) & 1)) >> 16)
}

// Float32 widens exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// F16 is an IEEE half as its bits.
type F16 uint16

// F16FromFloat32 rounds to nearest even (subnormals, infinities and NaN included).
func F16FromFloat32(f float32) F16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	exp := int((x >> 23) & 0xff)
	man := x & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return F16(sign | 0x7e00)
		}
		return F16(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return F16(sign | 0x7c00)
	}
	if e <= 0 { // subnormal in f16: the value in units of 2^-24
		if e < -10 {
			return F16(sign)
		}
		m := man | 0x800000
		shift := uint(14 - e)
		r := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return F16(sign | uint16(r))
	}
	h := uint32(e)<<10 | man>>13
	if rem := man & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the correct rounding, up to infinity
	}
	return F16(sign | uint16(h))
}

// Float32 widens exactly.
func (h F16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch exp {
	case 0:
		v := float32(man) / (1 << 24)
		if sign != 0 {
			return -v
		}
		return v
	case 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Dim is one dimension: a fixed Size, or the name of a Symbol declared on the graph (Symbol != "").
type Dim struct {
	Symbol string
	Size   int64
}

// N is a fixed dim.
func N(size int64) Dim { return Dim{Size: size} }

// S is a symbolic dim.
func S(symbol string) Dim { return Dim{Symbol: symbol} }

func (d Dim) String() string {
	if d.Symbol != "" {
		return d.Symbol
	}
	return strconv.FormatInt(d.Size, 10)
}

// cDims holds the C form of a shape; free releases the symbol strings.
type cDims struct {
	dims []C.weft_dim
	strs []*C.char
}

func newCDims(dims []Dim) (*cDims, error) {
	d := &cDims{dims: make([]C.weft_dim, len(dims))}
	for i, x := range dims {
		if x.Symbol == "" {
			d.dims[i].size = C.int64_t(x.Size)
			continue
		}
		s, err := cstr(x.Symbol, false)
		if err != nil {
			d.free()
			return nil, err
		}
		d.strs = append(d.strs, s)
		d.dims[i].symbol = s
	}
	return d, nil
}

func (d *cDims) ptr() *C.weft_dim {
	if len(d.dims) == 0 {
		return nil
	}
	return &d.dims[0]
}

func (d *cDims) free() {
	for _, s := range d.strs {
		free(s)
	}
}

// TensorKind is a weft_tensor_kind.
type TensorKind int32

const (
	Input        TensorKind = C.WEFT_TENSOR_INPUT        // bound per run, read only
	Weight       TensorKind = C.WEFT_TENSOR_WEIGHT       // bound per run, read only, same across runs
	State        TensorKind = C.WEFT_TENSOR_STATE        // bound per run, read and written in place
	Intermediate TensorKind = C.WEFT_TENSOR_INTERMEDIATE // produced by an op, owned by weft
)

// SymbolPolicy is a weft_symbol_policy: how a program specializes its kernels for a symbol's values. A kernel
// compiled for a value U serves any smaller value by masking when the symbol is "maskable" (dim 0 of every
// tensor it sizes, no op combining values across it: a batch dim, typically).
type SymbolPolicy int32

const (
	SymbolAuto    SymbolPolicy = C.WEFT_SYMBOL_AUTO    // BUCKETS (powers of two) when maskable, else EXACT
	SymbolExact   SymbolPolicy = C.WEFT_SYMBOL_EXACT   // one kernel per value
	SymbolBuckets SymbolPolicy = C.WEFT_SYMBOL_BUCKETS // one kernel per bucket, the first bucket >= the value
	SymbolRuntime SymbolPolicy = C.WEFT_SYMBOL_RUNTIME // one kernel (compiled at the maximum) for every value
)

// Tensor is a tensor id of one graph.
type Tensor uint64

// None marks an absent optional operand (WEFT_TENSOR_NONE).
const None Tensor = C.WEFT_TENSOR_NONE

// TensorInfo describes a tensor (weft_tensor_info), copied out of the graph.
type TensorInfo struct {
	Name     string
	Kind     TensorKind
	DType    DType
	Dims     []Dim
	IsOutput bool
}

// RopeStyle is a weft_rope_style.
type RopeStyle int32

const (
	RopeHalf        RopeStyle = C.WEFT_ROPE_HALF        // rotate halves: Llama / Qwen in HF
	RopeInterleaved RopeStyle = C.WEFT_ROPE_INTERLEAVED // rotate pairs: GPT-J
)

// RopeScaling is a weft_rope_scaling.
type RopeScaling int32

const (
	RopeScalingNone   RopeScaling = C.WEFT_ROPE_SCALING_NONE
	RopeScalingLinear RopeScaling = C.WEFT_ROPE_SCALING_LINEAR
	RopeScalingLlama3 RopeScaling = C.WEFT_ROPE_SCALING_LLAMA3
)

// RopeOptions mirrors weft_rope_options; zero fields take weft's defaults.
type RopeOptions struct {
	HeadDim             int64
	Theta               float64 // 0 means 10000
	Style               RopeStyle
	Scaling             RopeScaling
	Factor              float64 // LINEAR, LLAMA3 [8]
	LowFreqFactor       float64 // LLAMA3 [1]
	HighFreqFactor      float64 // LLAMA3 [4]
	OriginalMaxPosition int64   // LLAMA3 [8192]
}

func (o *RopeOptions) c() C.weft_rope_options {
	return C.weft_rope_options{
		struct_size:           C.size_t(C.sizeof_weft_rope_options),
		head_dim:              C.int64_t(o.HeadDim),
		theta:                 C.double(o.Theta),
		style:                 C.weft_rope_style(o.Style),
		scaling:               C.weft_rope_scaling(o.Scaling),
		factor:                C.double(o.Factor),
		low_freq_factor:       C.double(o.LowFreqFactor),
		high_freq_factor:      C.double(o.HighFreqFactor),
		original_max_position: C.int64_t(o.OriginalMaxPosition),
	}
}

// AttentionOptions mirrors weft_attention_options.
type AttentionOptions struct {
	NumQHeads  int64
	NumKVHeads int64 // NumQHeads must be a multiple of it (GQA)
	HeadDim    int64
	Scale      float64 // 0 means 1/sqrt(HeadDim)
}

func (o *AttentionOptions) c() C.weft_attention_options {
	return C.weft_attention_options{
		struct_size:  C.size_t(C.sizeof_weft_attention_options),
		num_q_heads:  C.int64_t(o.NumQHeads),
		num_kv_heads: C.int64_t(o.NumKVHeads),
		head_dim:     C.int64_t(o.HeadDim),
		scale:        C.double(o.Scale),
	}
}

// ReduceKind is a weft_reduce_kind.
type ReduceKind int32

const (
	ReduceSum  ReduceKind = C.WEFT_REDUCE_SUM
	ReduceMax  ReduceKind = C.WEFT_REDUCE_MAX
	ReduceMean ReduceKind = C.WEFT_REDUCE_MEAN
)
