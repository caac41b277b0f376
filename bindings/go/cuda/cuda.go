// Package cuda holds the few CUDA driver calls needed to give a weft Program device memory. libcuda.so.1 is
// opened at run time (dlopen), so nothing links against CUDA and machines without a driver still build and
// run the package's users.
package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*fn_u)(unsigned);
typedef int (*fn_pi_i)(int*, int);
typedef int (*fn_pp_i)(void**, int);
typedef int (*fn_i)(int);
typedef int (*fn_p)(void*);
typedef int (*fn_v)(void);
typedef int (*fn_pu64_sz)(uint64_t*, size_t);
typedef int (*fn_u64)(uint64_t);
typedef int (*fn_u64_p_sz)(uint64_t, const void*, size_t);
typedef int (*fn_p_u64_sz)(void*, uint64_t, size_t);
typedef int (*fn_i_pp)(int, const char**);

// The driver's entry points, resolved once by weft_cuda_open.
static void* fns[11];
static const char* fn_names[11] = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
  "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2",
  "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuGetErrorString"};

// Returns NULL on success, else what is missing (dlerror's text or the symbol's name).
static const char* weft_cuda_open(void) {
  if (fns[0]) return NULL;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW); // never closed: weft uses the same driver
  if (!lib) return dlerror();
  for (int i = 0; i < 11; ++i) {
    void* f = dlsym(lib, fn_names[i]);
    if (!f) return fn_names[i];
    fns[i] = f;
  }
  return NULL;
}

static int cu_init(void) { return ((fn_u)fns[0])(0); }
static int cu_device_get(int* d, int ordinal) { return ((fn_pi_i)fns[1])(d, ordinal); }
static int cu_primary_retain(uintptr_t* ctx, int d) {
  void* c = NULL;
  int r = ((fn_pp_i)fns[2])(&c, d);
  *ctx = (uintptr_t)c;
  return r;
}
static int cu_primary_release(int d) { return ((fn_i)fns[3])(d); }
static int cu_ctx_set_current(uintptr_t ctx) { return ((fn_p)fns[4])((void*)ctx); }
static int cu_ctx_synchronize(void) { return ((fn_v)fns[5])(); }
static int cu_mem_alloc(uint64_t* p, size_t n) { return ((fn_pu64_sz)fns[6])(p, n); }
static int cu_mem_free(uint64_t p) { return ((fn_u64)fns[7])(p); }
static int cu_htod(uint64_t dst, const void* src, size_t n) { return ((fn_u64_p_sz)fns[8])(dst, src, n); }
static int cu_dtoh(void* dst, uint64_t src, size_t n) { return ((fn_p_u64_sz)fns[9])(dst, src, n); }
static const char* cu_error_string(int r) {
  const char* s = NULL;
  if (((fn_i_pp)fns[10])(r, &s) != 0 || !s) return "unknown error";
  return s;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

var openMu sync.Mutex

// Error is a failed driver call.
type Error struct {
	Call    string
	Code    int
	Message string
}

func (e *Error) Error() string {
	if e.Code == 0 {
		return e.Call + ": " + e.Message
	}
	return fmt.Sprintf("%s failed: CUDA error %d (%s)", e.Call, e.Code, e.Message)
}

func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Message: C.GoString(C.cu_error_string(r))}
}

// Driver holds a device's primary context (the one weft uses for a program's DeviceOrdinal >= 0).
type Driver struct {
	device  C.int
	context C.uintptr_t
}

// Open loads the driver and retains device ordinal's primary context.
func Open(ordinal int) (*Driver, error) {
	openMu.Lock()
	why := C.weft_cuda_open()
	openMu.Unlock()
	if why != nil {
		return nil, &Error{Call: "loading libcuda.so.1", Message: C.GoString(why)}
	}
	if err := check("cuInit", C.cu_init()); err != nil {
		return nil, err
	}
	d := &Driver{}
	if err := check("cuDeviceGet", C.cu_device_get(&d.device, C.int(ordinal))); err != nil {
		return nil, err
	}
	if err := check("cuDevicePrimaryCtxRetain", C.cu_primary_retain(&d.context, d.device)); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the primary context; closing twice is a no-op.
func (d *Driver) Close() error {
	if d.context != 0 {
		C.cu_primary_release(d.device)
		d.context = 0
	}
	return nil
}

// Bind makes the context current on the calling goroutine's OS thread, and locks the goroutine to that
// thread (the driver's current context is per thread). Call the returned function when done.
func (d *Driver) Bind() (unbind func(), err error) {
	runtime.LockOSThread()
	if err := check("cuCtxSetCurrent", C.cu_ctx_set_current(d.context)); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

func (d *Driver) Synchronize() error { return check("cuCtxSynchronize", C.cu_ctx_synchronize()) }

// Buffer is device memory; Free releases it.
type Buffer struct {
	Ptr   uintptr
	Bytes int
}

// Alloc allocates bytes of device memory (call with the context bound).
func (d *Driver) Alloc(bytes int) (*Buffer, error) {
	var p C.uint64_t
	n := bytes
	if n == 0 {
		n = 1
	}
	if err := check("cuMemAlloc_v2", C.cu_mem_alloc(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return &Buffer{Ptr: uintptr(p), Bytes: bytes}, nil
}

// Upload allocates a buffer holding a copy of data (a slice of fixed-size elements).
func Upload[T any](d *Driver, data []T) (*Buffer, error) {
	var zero T
	n := len(data) * int(unsafe.Sizeof(zero))
	b, err := d.Alloc(n)
	if err != nil {
		return nil, err
	}
	if err := CopyIn(b, data); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// CopyIn copies data to the start of b.
func CopyIn[T any](b *Buffer, data []T) error {
	var zero T
	n := len(data) * int(unsafe.Sizeof(zero))
	if n > b.Bytes {
		return &Error{Call: "cuMemcpyHtoD_v2", Message: fmt.Sprintf("%d bytes into a buffer of %d", n, b.Bytes)}
	}
	if n == 0 {
		return nil
	}
	err := check("cuMemcpyHtoD_v2", C.cu_htod(C.uint64_t(b.Ptr), unsafe.Pointer(&data[0]), C.size_t(n)))
	runtime.KeepAlive(data)
	return err
}

// CopyOut copies the start of b into data.
func CopyOut[T any](b *Buffer, data []T) error {
	var zero T
	n := len(data) * int(unsafe.Sizeof(zero))
	if n > b.Bytes {
		return &Error{Call: "cuMemcpyDtoH_v2", Message: fmt.Sprintf("%d bytes out of a buffer of %d", n, b.Bytes)}
	}
	if n == 0 {
		return nil
	}
	err := check("cuMemcpyDtoH_v2", C.cu_dtoh(unsafe.Pointer(&data[0]), C.uint64_t(b.Ptr), C.size_t(n)))
	runtime.KeepAlive(data)
	return err
}

// Free releases the buffer; freeing twice is a no-op.
func (b *Buffer) Free() {
	if b.Ptr != 0 {
		C.cu_mem_free(C.uint64_t(b.Ptr))
		b.Ptr = 0
	}
}
