package weft

/*
#include <stdlib.h>
#include <string.h>
#include "weft/weft.h"

// A device address goes into the view's void* on the C side, so Go never holds it as a pointer.
static void weft_go_set_device_data(weft_binding* b, uintptr_t address) { b->value.data = (void*)address; }
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// cgo forbids handing C memory that holds Go pointers (and Go memory holding Go pointers) to C, and a
// weft_binding holds pointers to shapes and data. So binding arrays and shapes are built in C memory, and host
// data is staged there too: copied in before a reference run, copied back for the tensors the run writes.

type entry struct {
	tensor Tensor
	dtype  DType
	shape  []int64
	host   unsafe.Pointer // host bindings: the caller's Go slice
	bytes  int
	device uintptr // device bindings: a CUdeviceptr
}

func elementCount(shape []int64) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, invalid("negative dim %d in shape %v", d, shape)
		}
		if d != 0 && n > int(^uint(0)>>1)/int(d) {
			return 0, invalid("shape %v overflows", shape)
		}
		n *= int(d)
	}
	return n, nil
}

// cBlock is one C allocation holding a weft_binding array, its shapes and (for host runs) staged data.
type cBlock struct {
	base unsafe.Pointer
	arr  *C.weft_binding
	n    int
	data []unsafe.Pointer // staged data of each entry (host) or nil
}

func align8(n int) int { return (n + 7) &^ 7 }

func newCBlock(entries []entry, stageHost bool) *cBlock {
	size := align8(len(entries) * C.sizeof_weft_binding)
	for _, e := range entries {
		size += align8(len(e.shape) * 8)
		if stageHost {
			size += align8(e.bytes)
		}
	}
	b := &cBlock{base: C.calloc(1, C.size_t(size+8)), n: len(entries), data: make([]unsafe.Pointer, len(entries))}
	if b.base == nil {
		panic("weft: out of memory staging bindings")
	}
	b.arr = (*C.weft_binding)(b.base)
	arr := unsafe.Slice(b.arr, len(entries))
	off := align8(len(entries) * C.sizeof_weft_binding)
	for i, e := range entries {
		shape := unsafe.Add(b.base, off)
		off += align8(len(e.shape) * 8)
		copy(unsafe.Slice((*int64)(shape), len(e.shape)), e.shape)
		arr[i].tensor = C.weft_tensor(e.tensor)
		arr[i].value.dtype = C.weft_dtype(e.dtype)
		arr[i].value.rank = C.int32_t(len(e.shape))
		arr[i].value.shape = (*C.int64_t)(shape)
		arr[i].value.strides = nil // dense row-major
		if stageHost {
			b.data[i] = unsafe.Add(b.base, off)
			off += align8(e.bytes)
			if e.bytes > 0 {
				C.memcpy(b.data[i], e.host, C.size_t(e.bytes))
			}
			arr[i].value.data = b.data[i]
		} else {
			C.weft_go_set_device_data(&arr[i], C.uintptr_t(e.device))
		}
	}
	return b
}

func (b *cBlock) free() { C.free(b.base) }

// HostBindings binds Go slices to graph tensors for one reference run. Each slice's length must equal the
// product of its shape. After the run, outputs and State tensors are written back into their slices.
type HostBindings struct {
	entries []entry
}

func (b *HostBindings) add(t Tensor, dtype DType, ptr unsafe.Pointer, n int, shape []int64) error {
	count, err := elementCount(shape)
	if err != nil {
		return err
	}
	if count != n {
		return invalid("binding of tensor %#x: shape %v holds %d elements but the slice has %d", uint64(t), shape, count, n)
	}
	b.entries = append(b.entries, entry{tensor: t, dtype: dtype, shape: append([]int64(nil), shape...), host: ptr, bytes: n * dtype.Size()})
	return nil
}

func ptrOf[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func (b *HostBindings) Float32(t Tensor, data []float32, shape ...int64) error {
	return b.add(t, DTypeF32, ptrOf(data), len(data), shape)
}
func (b *HostBindings) BF16(t Tensor, data []BF16, shape ...int64) error {
	return b.add(t, DTypeBF16, ptrOf(data), len(data), shape)
}
func (b *HostBindings) F16(t Tensor, data []F16, shape ...int64) error {
	return b.add(t, DTypeF16, ptrOf(data), len(data), shape)
}
func (b *HostBindings) Int32(t Tensor, data []int32, shape ...int64) error {
	return b.add(t, DTypeI32, ptrOf(data), len(data), shape)
}
func (b *HostBindings) Int64(t Tensor, data []int64, shape ...int64) error {
	return b.add(t, DTypeI64, ptrOf(data), len(data), shape)
}

// RunReference runs the CPU reference interpreter. Outputs and State tensors are copied back into their
// slices, also after a failed run (weft may have written them partly, as the C API says).
func (g *Graph) RunReference(b *HostBindings) error {
	blk := newCBlock(b.entries, true)
	defer blk.free()
	defer runtime.KeepAlive(g)
	err := call(func() C.weft_status { return C.weft_graph_run_reference(g.h, blk.arr, C.int32_t(blk.n)) })
	for i, e := range b.entries {
		if info, ierr := g.TensorInfo(e.tensor); ierr == nil && (info.IsOutput || info.Kind == State) && e.bytes > 0 {
			C.memcpy(e.host, blk.data[i], C.size_t(e.bytes))
		}
	}
	runtime.KeepAlive(b)
	return err
}

// DeviceBindings binds device memory (CUdeviceptr addresses, dense layout) to graph tensors for a program run.
type DeviceBindings struct {
	entries []entry
}

// Add binds tensor to elements of dtype and shape at device address ptr.
func (b *DeviceBindings) Add(t Tensor, ptr uintptr, dtype DType, shape ...int64) {
	b.entries = append(b.entries, entry{tensor: t, dtype: dtype, shape: append([]int64(nil), shape...), device: ptr})
}
