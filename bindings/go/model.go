package weft

/*
#include <stdlib.h>
#include <string.h>
#include "weft/weft.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Backend is a weft_backend.
type Backend int32

const (
	BackendAuto      Backend = C.WEFT_BACKEND_AUTO // the GPU when one is usable, else the CPU reference
	BackendGPU       Backend = C.WEFT_BACKEND_GPU
	BackendReference Backend = C.WEFT_BACKEND_REFERENCE
)

// ModelOptions mirrors weft_model_options; zero fields take weft's defaults.
type ModelOptions struct {
	Backend       Backend
	DeviceOrdinal int32
	MaxBatch      int32
	MaxSeq        int32
	WatchdogMs    int32
	DisableCache  bool
}

// ModelInfo mirrors weft_model_info.
type ModelInfo struct {
	ModelType                                            string
	Layers, Hidden, QHeads, KVHeads, HeadDim, FFN, Vocab int32
	MaxBatch, MaxSeq                                     int32
	Backend                                              Backend // GPU or Reference, never Auto
	Device                                               string
	WeightBytes                                          int64
}

// GenerateRequest is one greedy generation: PromptIDs holds Batch rows of PromptLen tokens.
type GenerateRequest struct {
	Batch, PromptLen, Steps int32
	PromptIDs               []int32
	ForcedIDs               []int32 // nil, or [Batch][Steps] teacher-forced tokens
	MultiStep               bool    // every step in one launch (GPU; not with ForcedIDs or logits)
	WantLogits              bool
}

// Generation is what Generate returns.
type Generation struct {
	Tokens              []int32   // [Batch][Steps]
	Logits              []float32 // [Steps][Batch][Vocab] when asked for
	StepMs              []float32 // [Steps]
	PrefillMs, DecodeMs float64
}

// Model is a Hugging Face Llama / Qwen3 folder loaded for greedy generation (weft_model).
type Model struct {
	h *C.weft_model
}

// LoadModel loads the model folder dir. opts may be nil.
func LoadModel(ctx *Context, dir string, opts *ModelOptions) (*Model, error) {
	if opts == nil {
		opts = &ModelOptions{}
	}
	d, err := cstr(dir, false)
	if err != nil {
		return nil, err
	}
	defer free(d)
	o := C.weft_model_options{
		struct_size:    C.size_t(C.sizeof_weft_model_options),
		backend:        C.weft_backend(opts.Backend),
		device_ordinal: C.int32_t(opts.DeviceOrdinal),
		max_batch:      C.int32_t(opts.MaxBatch),
		max_seq:        C.int32_t(opts.MaxSeq),
		watchdog_ms:    C.int32_t(opts.WatchdogMs),
		disable_cache:  boolInt(opts.DisableCache),
	}
	m := &Model{}
	err = call(func() C.weft_status { return C.weft_model_load(ctx.h, d, &o, &m.h) })
	runtime.KeepAlive(ctx)
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close waits for the model's GPU work and frees it; closing twice is a no-op.
func (m *Model) Close() error {
	if m.h != nil {
		C.weft_model_destroy(m.h)
		m.h = nil
	}
	runtime.SetFinalizer(m, nil)
	return nil
}

func (m *Model) Info() (ModelInfo, error) {
	var i C.weft_model_info
	i.struct_size = C.size_t(C.sizeof_weft_model_info)
	defer runtime.KeepAlive(m)
	if err := call(func() C.weft_status { return C.weft_model_get_info(m.h, &i) }); err != nil {
		return ModelInfo{}, err
	}
	return ModelInfo{
		ModelType: fixedString(unsafe.Pointer(&i.model_type[0]), len(i.model_type)),
		Layers:    int32(i.layers), Hidden: int32(i.hidden), QHeads: int32(i.q_heads), KVHeads: int32(i.kv_heads),
		HeadDim: int32(i.head_dim), FFN: int32(i.ffn), Vocab: int32(i.vocab),
		MaxBatch: int32(i.max_batch), MaxSeq: int32(i.max_seq), Backend: Backend(i.backend),
		Device:      fixedString(unsafe.Pointer(&i.device[0]), len(i.device)),
		WeightBytes: int64(i.weight_bytes),
	}, nil
}

// Compile compiles (or loads from the cache) the megakernel for batch rows.
func (m *Model) Compile(batch int32) (CompileReport, error) {
	var r C.weft_compile_report
	r.struct_size = C.size_t(C.sizeof_weft_compile_report)
	defer runtime.KeepAlive(m)
	if err := call(func() C.weft_status { return C.weft_model_compile(m.h, C.int32_t(batch), &r) }); err != nil {
		return CompileReport{}, err
	}
	return reportFromC(&r), nil
}

// cInts copies a Go slice into C memory (the request struct that points to it lives in C memory too).
func cInts(v []int32) *C.int32_t {
	if v == nil {
		return nil
	}
	p := (*C.int32_t)(C.calloc(C.size_t(len(v)+1), 4))
	copy(unsafe.Slice((*int32)(unsafe.Pointer(p)), len(v)), v)
	return p
}

// Generate runs greedy generation; it blocks until done.
func (m *Model) Generate(req *GenerateRequest) (*Generation, error) {
	if req.Batch < 0 || req.PromptLen < 0 || req.Steps < 0 {
		return nil, invalid("batch %d, prompt_len %d and steps %d must not be negative", req.Batch, req.PromptLen, req.Steps)
	}
	batch, plen, steps := int(req.Batch), int(req.PromptLen), int(req.Steps)
	// Sizes are checked here because weft reads and writes the buffers by the request's counts.
	if len(req.PromptIDs) != batch*plen {
		return nil, invalid("PromptIDs holds %d tokens, Batch * PromptLen is %d", len(req.PromptIDs), batch*plen)
	}
	if req.ForcedIDs != nil && len(req.ForcedIDs) != batch*steps {
		return nil, invalid("ForcedIDs holds %d tokens, Batch * Steps is %d", len(req.ForcedIDs), batch*steps)
	}
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	vocab := int(info.Vocab)

	r := (*C.weft_generate_request)(C.calloc(1, C.sizeof_weft_generate_request))
	defer C.free(unsafe.Pointer(r))
	r.struct_size = C.size_t(C.sizeof_weft_generate_request)
	r.batch, r.prompt_len, r.steps = C.int32_t(batch), C.int32_t(plen), C.int32_t(steps)
	r.prompt_ids = cInts(req.PromptIDs)
	defer C.free(unsafe.Pointer(r.prompt_ids))
	r.forced_ids = cInts(req.ForcedIDs)
	defer C.free(unsafe.Pointer(r.forced_ids))
	r.multi_step = boolInt(req.MultiStep)
	r.out_tokens = (*C.int32_t)(C.calloc(C.size_t(batch*steps+1), 4))
	defer C.free(unsafe.Pointer(r.out_tokens))
	r.out_step_ms = (*C.float)(C.calloc(C.size_t(steps+1), 4))
	defer C.free(unsafe.Pointer(r.out_step_ms))
	if req.WantLogits {
		r.out_logits = (*C.float)(C.calloc(C.size_t(steps*batch*vocab+1), 4))
		defer C.free(unsafe.Pointer(r.out_logits))
	}
	var rep C.weft_generate_report
	rep.struct_size = C.size_t(C.sizeof_weft_generate_report)
	defer runtime.KeepAlive(m)
	if err := call(func() C.weft_status { return C.weft_model_generate(m.h, r, &rep) }); err != nil {
		return nil, err
	}
	g := &Generation{
		Tokens:    append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(r.out_tokens)), batch*steps)...),
		StepMs:    append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(r.out_step_ms)), steps)...),
		PrefillMs: float64(rep.prefill_ms),
		DecodeMs:  float64(rep.decode_ms),
	}
	if req.WantLogits {
		g.Logits = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(r.out_logits)), steps*batch*vocab)...)
	}
	return g, nil
}
