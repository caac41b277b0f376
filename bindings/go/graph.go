package weft

/*
#include <stdlib.h>
#include "weft/weft.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Graph is a weft_graph. Methods that modify it must not run while another goroutine uses it; reading it
// (queries, reference runs, serialization) may happen from several goroutines at once.
type Graph struct {
	h *C.weft_graph
}

func newGraph(h *C.weft_graph) *Graph {
	g := &Graph{h: h}
	runtime.SetFinalizer(g, (*Graph).Close)
	return g
}

// NewGraph creates an empty graph; name labels it in messages ("" for none).
func NewGraph(ctx *Context, name string) (*Graph, error) {
	n, err := cstr(name, true)
	if err != nil {
		return nil, err
	}
	defer free(n)
	var h *C.weft_graph
	err = call(func() C.weft_status { return C.weft_graph_create(ctx.h, n, &h) })
	runtime.KeepAlive(ctx)
	if err != nil {
		return nil, err
	}
	return newGraph(h), nil
}

// GraphFromJSON reads canonical JSON (as Graph.JSON writes it) and validates the graph.
func GraphFromJSON(ctx *Context, json string) (*Graph, error) {
	j, err := cstr(json, false)
	if err != nil {
		return nil, err
	}
	defer free(j)
	var h *C.weft_graph
	err = call(func() C.weft_status { return C.weft_graph_from_json(ctx.h, j, &h) })
	runtime.KeepAlive(ctx)
	if err != nil {
		return nil, err
	}
	return newGraph(h), nil
}

// Close destroys the graph; closing twice is a no-op. Later calls on it return ErrInvalidHandle.
func (g *Graph) Close() error {
	if g.h != nil {
		C.weft_graph_destroy(g.h)
		g.h = nil
	}
	runtime.SetFinalizer(g, nil)
	return nil
}

// DeclareSymbol declares a symbolic dimension taking values in [min, max].
func (g *Graph) DeclareSymbol(name string, min, max int64) error {
	n, err := cstr(name, false)
	if err != nil {
		return err
	}
	defer free(n)
	defer runtime.KeepAlive(g)
	return call(func() C.weft_status {
		return C.weft_graph_declare_symbol(g.h, n, C.int64_t(min), C.int64_t(max))
	})
}

// SetSymbolPolicy sets how programs specialize for symbol name. With SymbolBuckets, buckets are ascending upper
// bounds within the symbol's range (its maximum is added when missing); none means powers of two. Other
// policies take no buckets. Saved in the graph's JSON; not part of its hash.
func (g *Graph) SetSymbolPolicy(name string, policy SymbolPolicy, buckets ...int64) error {
	n, err := cstr(name, false)
	if err != nil {
		return err
	}
	defer free(n)
	var b *C.int64_t
	if len(buckets) > 0 {
		b = (*C.int64_t)(unsafe.Pointer(&buckets[0])) // no Go pointers inside: cgo allows passing it
	}
	defer runtime.KeepAlive(g)
	return call(func() C.weft_status {
		return C.weft_graph_set_symbol_policy(g.h, n, C.weft_symbol_policy(policy), b, C.int32_t(len(buckets)))
	})
}

// AddTensor adds a tensor bound at each run (Input, Weight or State).
func (g *Graph) AddTensor(kind TensorKind, name string, dtype DType, dims ...Dim) (Tensor, error) {
	n, err := cstr(name, false)
	if err != nil {
		return None, err
	}
	defer free(n)
	d, err := newCDims(dims)
	if err != nil {
		return None, err
	}
	defer d.free()
	return g.result(func(out *C.weft_tensor) C.weft_status {
		return C.weft_graph_add_tensor(g.h, C.weft_tensor_kind(kind), n, C.weft_dtype(dtype), d.ptr(),
			C.int32_t(len(dims)), out)
	})
}

func (g *Graph) Input(name string, dtype DType, dims ...Dim) (Tensor, error) {
	return g.AddTensor(Input, name, dtype, dims...)
}
func (g *Graph) Weight(name string, dtype DType, dims ...Dim) (Tensor, error) {
	return g.AddTensor(Weight, name, dtype, dims...)
}
func (g *Graph) State(name string, dtype DType, dims ...Dim) (Tensor, error) {
	return g.AddTensor(State, name, dtype, dims...)
}

func (g *Graph) result(f func(out *C.weft_tensor) C.weft_status) (Tensor, error) {
	var out C.weft_tensor
	err := call(func() C.weft_status { return f(&out) })
	runtime.KeepAlive(g)
	if err != nil {
		return None, err
	}
	return Tensor(out), nil
}

// named runs a typed op helper with the result's name ("" lets weft pick one).
func (g *Graph) named(name string, f func(n *C.char, out *C.weft_tensor) C.weft_status) (Tensor, error) {
	n, err := cstr(name, true)
	if err != nil {
		return None, err
	}
	defer free(n)
	return g.result(func(out *C.weft_tensor) C.weft_status { return f(n, out) })
}

func tensors(ts []Tensor) *C.weft_tensor {
	if len(ts) == 0 {
		return nil
	}
	return (*C.weft_tensor)(unsafe.Pointer(&ts[0])) // Tensor and weft_tensor are both uint64
}

// Op adds any op of the table by name; attrsJSON is a JSON object ("" for all defaults).
func (g *Graph) Op(op string, inputs []Tensor, attrsJSON, name string) (Tensor, error) {
	o, err := cstr(op, false)
	if err != nil {
		return None, err
	}
	defer free(o)
	a, err := cstr(attrsJSON, true)
	if err != nil {
		return None, err
	}
	defer free(a)
	return g.named(name, func(n *C.char, out *C.weft_tensor) C.weft_status {
		return C.weft_graph_add_op(g.h, o, tensors(inputs), C.int32_t(len(inputs)), a, n, out)
	})
}

func t(x Tensor) C.weft_tensor { return C.weft_tensor(x) }

func (g *Graph) Embedding(table, ids Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_embedding(g.h, t(table), t(ids), n, o)
	})
}
func (g *Graph) RMSNorm(x, weight Tensor, eps float32, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_rmsnorm(g.h, t(x), t(weight), C.float(eps), n, o)
	})
}
func (g *Graph) HeadRMSNorm(x, weight Tensor, headDim int64, eps float32, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_head_rmsnorm(g.h, t(x), t(weight), C.int64_t(headDim), C.float(eps), n, o)
	})
}

// LayerNorm: bias may be None.
func (g *Graph) LayerNorm(x, weight, bias Tensor, eps float32, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_layernorm(g.h, t(x), t(weight), t(bias), C.float(eps), n, o)
	})
}

// Linear is x·weightᵀ + bias + residual; bias and residual may be None.
func (g *Graph) Linear(x, weight, bias, residual Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_linear(g.h, t(x), t(weight), t(bias), t(residual), n, o)
	})
}
func (g *Graph) MatMul(a, b Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_matmul(g.h, t(a), t(b), n, o) })
}
func (g *Graph) Add(a, b Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_add(g.h, t(a), t(b), n, o) })
}
func (g *Graph) Mul(a, b Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_mul(g.h, t(a), t(b), n, o) })
}
func (g *Graph) SiLU(x Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_silu(g.h, t(x), n, o) })
}
func (g *Graph) GELU(x Tensor, tanhApproximation bool, name string) (Tensor, error) {
	var th C.int
	if tanhApproximation {
		th = 1
	}
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_gelu(g.h, t(x), th, n, o) })
}

// SiLUMul is silu(gate) * up; with up None, gate holds [gate | up] in its last dim.
func (g *Graph) SiLUMul(gate, up Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_silu_mul(g.h, t(gate), t(up), n, o)
	})
}
func (g *Graph) RoPE(x, positions Tensor, opts RopeOptions, name string) (Tensor, error) {
	co := opts.c()
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_rope(g.h, t(x), t(positions), &co, n, o)
	})
}

// AttentionDecode is one decode step: writes kNew/vNew into the State caches at positions, then attends.
func (g *Graph) AttentionDecode(q, kNew, vNew, kCache, vCache, positions Tensor, opts AttentionOptions, name string) (Tensor, error) {
	co := opts.c()
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_attention_decode(g.h, t(q), t(kNew), t(vNew), t(kCache), t(vCache), t(positions), &co, n, o)
	})
}
func (g *Graph) Softmax(x Tensor, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status { return C.weft_op_softmax(g.h, t(x), n, o) })
}

// ArgMax gives the index of the first maximum of the last dim as dtype (DTypeI32 or DTypeI64).
func (g *Graph) ArgMax(x Tensor, dtype DType, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_argmax(g.h, t(x), C.weft_dtype(dtype), n, o)
	})
}
func (g *Graph) Reduce(x Tensor, kind ReduceKind, axis int32, keepdim bool, name string) (Tensor, error) {
	var k C.int
	if keepdim {
		k = 1
	}
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_reduce(g.h, t(x), C.weft_reduce_kind(kind), C.int32_t(axis), k, n, o)
	})
}
func (g *Graph) Cast(x Tensor, dtype DType, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_cast(g.h, t(x), C.weft_dtype(dtype), n, o)
	})
}
func (g *Graph) Reshape(x Tensor, name string, dims ...Dim) (Tensor, error) {
	d, err := newCDims(dims)
	if err != nil {
		return None, err
	}
	defer d.free()
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_reshape(g.h, t(x), d.ptr(), C.int32_t(len(dims)), n, o)
	})
}

// Slice keeps elements [start, end) of axis (negative axis counts from the end).
func (g *Graph) Slice(x Tensor, axis int32, start, end int64, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_slice(g.h, t(x), C.int32_t(axis), C.int64_t(start), C.int64_t(end), n, o)
	})
}
func (g *Graph) Concat(inputs []Tensor, axis int32, name string) (Tensor, error) {
	return g.named(name, func(n *C.char, o *C.weft_tensor) C.weft_status {
		return C.weft_op_concat(g.h, tensors(inputs), C.int32_t(len(inputs)), C.int32_t(axis), n, o)
	})
}

// MarkOutput marks tensor as a graph output ("" keeps its name).
func (g *Graph) MarkOutput(tensor Tensor, name string) error {
	n, err := cstr(name, true)
	if err != nil {
		return err
	}
	defer free(n)
	defer runtime.KeepAlive(g)
	return call(func() C.weft_status { return C.weft_graph_mark_output(g.h, t(tensor), n) })
}

func (g *Graph) Validate() error {
	defer runtime.KeepAlive(g)
	return call(func() C.weft_status { return C.weft_graph_validate(g.h) })
}

func (g *Graph) TensorInfo(tensor Tensor) (TensorInfo, error) {
	var i C.weft_tensor_info
	i.struct_size = C.size_t(C.sizeof_weft_tensor_info)
	defer runtime.KeepAlive(g)
	if err := call(func() C.weft_status { return C.weft_graph_tensor_info(g.h, t(tensor), &i) }); err != nil {
		return TensorInfo{}, err
	}
	info := TensorInfo{Name: C.GoString(i.name), Kind: TensorKind(i.kind), DType: DType(i.dtype), IsOutput: i.is_output != 0}
	for k := 0; k < int(i.rank) && k < C.WEFT_MAX_RANK; k++ {
		d := i.dims[k]
		if d.symbol != nil {
			info.Dims = append(info.Dims, S(C.GoString(d.symbol)))
		} else {
			info.Dims = append(info.Dims, N(int64(d.size)))
		}
	}
	return info, nil
}

func (g *Graph) FindTensor(name string) (Tensor, error) {
	n, err := cstr(name, false)
	if err != nil {
		return None, err
	}
	defer free(n)
	return g.result(func(out *C.weft_tensor) C.weft_status { return C.weft_graph_find_tensor(g.h, n, out) })
}

// Outputs lists the outputs in marking order.
func (g *Graph) Outputs() ([]Tensor, error) {
	var n C.int32_t
	defer runtime.KeepAlive(g)
	if err := call(func() C.weft_status { return C.weft_graph_num_outputs(g.h, &n) }); err != nil {
		return nil, err
	}
	outs := make([]Tensor, n)
	for i := range outs {
		var o C.weft_tensor
		if err := call(func() C.weft_status { return C.weft_graph_output(g.h, C.int32_t(i), &o) }); err != nil {
			return nil, err
		}
		outs[i] = Tensor(o)
	}
	return outs, nil
}

// JSON is the canonical JSON of the graph (stable across runs and processes).
func (g *Graph) JSON() (string, error) {
	return g.text(func(s **C.char) C.weft_status { return C.weft_graph_to_json(g.h, s) })
}

// Text is a readable listing (symbols, tensors, ops).
func (g *Graph) Text() (string, error) {
	return g.text(func(s **C.char) C.weft_status { return C.weft_graph_to_text(g.h, s) })
}

func (g *Graph) text(f func(**C.char) C.weft_status) (string, error) {
	var out string
	defer runtime.KeepAlive(g)
	// Copied inside the locked call: the string lives only until the graph changes.
	err := call(func() C.weft_status {
		var s *C.char
		st := f(&s)
		if st == C.WEFT_OK {
			out = C.GoString(s)
		}
		return st
	})
	return out, err
}

// Hash is the XXH3-128 of the structure (names left out): [0] the low, [1] the high half.
func (g *Graph) Hash() ([2]uint64, error) {
	var h [2]C.uint64_t
	defer runtime.KeepAlive(g)
	err := call(func() C.weft_status { return C.weft_graph_hash(g.h, &h[0]) })
	return [2]uint64{uint64(h[0]), uint64(h[1])}, err
}
