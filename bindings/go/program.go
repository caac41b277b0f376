package weft

/*
#include <stdint.h>
#include <stdlib.h>
#include "weft/weft.h"

// Streams travel as integers so that Go never holds a CUstream as a pointer.
static weft_status weft_go_program_run(weft_program* p, const weft_binding* b, int32_t n, uintptr_t stream) {
  return weft_program_run(p, b, n, (void*)stream);
}
static weft_status weft_go_program_synchronize(weft_program* p, uintptr_t stream) {
  return weft_program_synchronize(p, (void*)stream);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// CompileOptions mirrors weft_compile_options.
type CompileOptions struct {
	Arch         string // "sm_80", "sm_90a" or "sm_100a"; "" means sm_90a
	NumSMs       int32  // queues / persistent blocks; 0 means the arch's usual SM count
	DisableCache bool   // neither read nor write the kernel cache
}

// CompileReport mirrors weft_compile_report.
type CompileReport struct {
	NumTasks, NumEvents, NumQueues, ArenaBytes, CubinBytes int64
	TotalMs, LowerMs, CompileMs                            float64
	CacheHit                                               bool
	Key                                                    string // the cache key, 32 hex digits
}

func reportFromC(r *C.weft_compile_report) CompileReport {
	return CompileReport{
		NumTasks: int64(r.num_tasks), NumEvents: int64(r.num_events), NumQueues: int64(r.num_queues),
		ArenaBytes: int64(r.arena_bytes), CubinBytes: int64(r.cubin_bytes),
		TotalMs: float64(r.total_ms), LowerMs: float64(r.lower_ms), CompileMs: float64(r.compile_ms),
		CacheHit: r.cache_hit != 0,
		Key:      fixedString(unsafe.Pointer(&r.key[0]), len(r.key)),
	}
}

// fixedString reads a NUL-terminated char array of a C struct (the whole array if it has no NUL).
func fixedString(p unsafe.Pointer, n int) string {
	b := unsafe.Slice((*byte)(p), n)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func boolInt(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// Compile lowers the graph and compiles its megakernel cubin for every symbol at its maximum (no GPU needed).
// opts may be nil.
func (g *Graph) Compile(opts *CompileOptions) (CompileReport, error) {
	if opts == nil {
		opts = &CompileOptions{}
	}
	arch, err := cstr(opts.Arch, true)
	if err != nil {
		return CompileReport{}, err
	}
	defer free(arch)
	o := C.weft_compile_options{
		struct_size:   C.size_t(C.sizeof_weft_compile_options),
		arch:          arch,
		num_sms:       C.int32_t(opts.NumSMs),
		disable_cache: boolInt(opts.DisableCache),
	}
	var r C.weft_compile_report
	r.struct_size = C.size_t(C.sizeof_weft_compile_report)
	defer runtime.KeepAlive(g)
	if err := call(func() C.weft_status { return C.weft_graph_compile(g.h, &o, &r) }); err != nil {
		return CompileReport{}, err
	}
	return reportFromC(&r), nil
}

// ProgramOptions mirrors weft_program_options. Use DefaultProgramOptions for weft's defaults. With Lazy, a run
// whose specialization is not loaded yet runs on the generic kernel (every maskable symbol at its maximum) while
// the specialization compiles on a background thread, instead of waiting for the compile.
type ProgramOptions struct {
	DeviceOrdinal    int32  // >= 0: that device's primary context; -1: the thread's current context (or device 0)
	Arch             string // "": the device's own
	WatchdogMs       int32  // 0: $WEFT_WATCHDOG_MS, else 5000
	DisableCache     bool   // no kernel cache
	MaxLoadedKernels int32  // specializations kept loaded (the least recently used unloaded beyond it); 0: 8
	Lazy             bool   // runs wait for no compile: the generic kernel serves them while theirs compiles
}

// DefaultProgramOptions is device -1 (the current context) and every other field at its default.
func DefaultProgramOptions() ProgramOptions { return ProgramOptions{DeviceOrdinal: -1} }

// Program is a graph compiled and loaded on a GPU (weft_program). Calls on one program are serialized by
// weft; run it on one stream at a time.
type Program struct {
	h *C.weft_program
}

// NewProgram loads graph (copied) for a device; kernels are compiled per shape on first use. opts may be nil.
func NewProgram(g *Graph, opts *ProgramOptions) (*Program, error) {
	if opts == nil {
		d := DefaultProgramOptions()
		opts = &d
	}
	arch, err := cstr(opts.Arch, true)
	if err != nil {
		return nil, err
	}
	defer free(arch)
	o := C.weft_program_options{
		struct_size:        C.size_t(C.sizeof_weft_program_options),
		device_ordinal:     C.int32_t(opts.DeviceOrdinal),
		arch:               arch,
		watchdog_ms:        C.int32_t(opts.WatchdogMs),
		disable_cache:      boolInt(opts.DisableCache),
		max_loaded_kernels: C.int32_t(opts.MaxLoadedKernels),
		lazy:               boolInt(opts.Lazy),
	}
	p := &Program{}
	err = call(func() C.weft_status { return C.weft_program_create(g.h, &o, &p.h) })
	runtime.KeepAlive(g)
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(p, (*Program).Close)
	return p, nil
}

// Close waits for the program's launches and frees it; closing twice is a no-op.
func (p *Program) Close() error {
	if p.h != nil {
		C.weft_program_destroy(p.h)
		p.h = nil
	}
	runtime.SetFinalizer(p, nil)
	return nil
}

// Run launches one run on stream (a CUstream as an integer; 0 is the legacy default stream). Asynchronous:
// device-side failures are reported by Synchronize. The bound memory must stay valid until the run completes.
func (p *Program) Run(b *DeviceBindings, stream uintptr) error {
	blk := newCBlock(b.entries, false)
	defer blk.free()
	defer runtime.KeepAlive(p)
	return call(func() C.weft_status {
		return C.weft_go_program_run(p.h, blk.arr, C.int32_t(blk.n), C.uintptr_t(stream))
	})
}

// ProgramStats mirrors weft_program_stats: what a program has done so far.
type ProgramStats struct {
	Compiles        int64   // specializations compiled (kernel cache misses)
	CacheLoads      int64   // specializations loaded from the kernel cache
	Evictions       int64   // specializations unloaded to stay within MaxLoadedKernels
	GenericRuns     int64   // lazy mode: runs served by the generic kernel while theirs compiled
	Pending         int64   // specializations compiling in the background now
	Loaded          int64   // specializations loaded now
	HostJIT         bool    // runs are checked and planned by JIT-compiled host code (LLVM ORC)
	HostJITCacheHit bool    // that code's object was loaded from the kernel cache
	HostJITMs       float64 // generating + compiling (or loading) it, at NewProgram
}

// Stats reports what the program has done so far; background compiles that have finished are taken in first.
func (p *Program) Stats() (ProgramStats, error) {
	var s C.weft_program_stats
	s.struct_size = C.size_t(C.sizeof_weft_program_stats)
	defer runtime.KeepAlive(p)
	if err := call(func() C.weft_status { return C.weft_program_get_stats(p.h, &s) }); err != nil {
		return ProgramStats{}, err
	}
	return ProgramStats{
		Compiles: int64(s.compiles), CacheLoads: int64(s.cache_loads), Evictions: int64(s.evictions),
		GenericRuns: int64(s.generic_runs), Pending: int64(s.pending), Loaded: int64(s.loaded),
		HostJIT: s.host_jit != 0, HostJITCacheHit: s.host_jit_cache_hit != 0, HostJITMs: float64(s.host_jit_ms),
	}, nil
}

// Synchronize waits for stream and reports a device-side failure of an earlier run (ErrDeadlock,
// ErrInvalidArgument). The program stays usable afterwards.
func (p *Program) Synchronize(stream uintptr) error {
	defer runtime.KeepAlive(p)
	return call(func() C.weft_status { return C.weft_go_program_synchronize(p.h, C.uintptr_t(stream)) })
}
