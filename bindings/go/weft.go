// Package weft is the Go binding of weft, a JIT runtime that turns tensor graphs into one persistent GPU
// megakernel. It is a thin layer over the C API in include/weft/weft.h: handles (Context, Graph, Program,
// Model) are released by Close, with a finalizer as a safety net; every failure is a *Error carrying weft's
// status and message.
//
// Link flags come from CGO_LDFLAGS (e.g. CGO_LDFLAGS="-L/path/to/build -Wl,-rpath,/path/to/build"); the
// package itself asks for -lweft.
package weft

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lweft
#include <stdlib.h>
#include "weft/weft.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Header version this package was written against (WEFT_VERSION_*).
const (
	VersionMajor  = C.WEFT_VERSION_MAJOR
	VersionMinor  = C.WEFT_VERSION_MINOR
	VersionPatch  = C.WEFT_VERSION_PATCH
	HeaderVersion = C.WEFT_VERSION
)

// Version is the loaded library's version as WEFT_VERSION encodes it (0.1.0 -> 100).
func Version() int { return int(C.weft_version()) }

// VersionString is the loaded library's version, "MAJOR.MINOR.PATCH".
func VersionString() string { return C.GoString(C.weft_version_string()) }

// Status is a weft_status.
type Status int32

const (
	OK                 Status = C.WEFT_OK
	ErrInvalidArgument Status = C.WEFT_ERROR_INVALID_ARGUMENT
	ErrInvalidHandle   Status = C.WEFT_ERROR_INVALID_HANDLE
	ErrOutOfMemory     Status = C.WEFT_ERROR_OUT_OF_MEMORY
	ErrUnsupported     Status = C.WEFT_ERROR_UNSUPPORTED
	ErrCompile         Status = C.WEFT_ERROR_COMPILE
	ErrCUDA            Status = C.WEFT_ERROR_CUDA
	ErrCache           Status = C.WEFT_ERROR_CACHE
	ErrDeadlock        Status = C.WEFT_ERROR_DEADLOCK
	ErrIO              Status = C.WEFT_ERROR_IO
	ErrInternal        Status = C.WEFT_ERROR_INTERNAL
)

// String is weft's name for the status, e.g. "WEFT_ERROR_INVALID_ARGUMENT".
func (s Status) String() string { return C.GoString(C.weft_status_string(C.weft_status(s))) }

// Error is a failed weft call: its status and weft's message (weft_last_error_message), or a message of this
// package for arguments it rejects before calling weft (always ErrInvalidArgument).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Status.String() + ": " + e.Message }

// Is makes errors.Is(err, &weft.Error{Status: weft.ErrCUDA}) match any error of that status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status && (t.Message == "" || t.Message == e.Message)
}

func invalid(format string, args ...any) error {
	return &Error{Status: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// call runs one weft call and, on failure, reads the message on the same OS thread: the message is
// thread-local and a goroutine may otherwise move to another thread between the two cgo calls.
func call(f func() C.weft_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := f()
	if s == C.WEFT_OK {
		return nil
	}
	return &Error{Status: Status(s), Message: C.GoString(C.weft_last_error_message())}
}

// cstr converts a Go string for weft; "" gives NULL when nullIfEmpty (weft then picks a name).
// The caller frees the result with C.free (free(NULL) is a no-op).
func cstr(s string, nullIfEmpty bool) (*C.char, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, invalid("string %q contains a NUL byte", s)
		}
	}
	if s == "" && nullIfEmpty {
		return nil, nil
	}
	return C.CString(s), nil
}

func free(p *C.char) { C.free(unsafe.Pointer(p)) }

// OpNames lists weft's op table.
func OpNames() []string {
	n := int(C.weft_op_count())
	names := make([]string, n)
	for i := range names {
		names[i] = C.GoString(C.weft_op_name(C.int32_t(i)))
	}
	return names
}

// Context is a weft_context. Graphs keep their context alive, so it may be closed before them.
type Context struct {
	h *C.weft_context
}

// NewContext creates a context with default options.
func NewContext() (*Context, error) {
	c := &Context{}
	if err := call(func() C.weft_status { return C.weft_context_create(nil, &c.h) }); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(c, (*Context).Close)
	return c, nil
}

// Close releases the context; closing twice is a no-op. Not to be called while another goroutine uses it.
func (c *Context) Close() error {
	if c.h != nil {
		C.weft_context_destroy(c.h)
		c.h = nil
	}
	runtime.SetFinalizer(c, nil)
	return nil
}

// DeviceCount is the number of CUDA devices; without a driver or GPU it returns 0 and an ErrCUDA error saying
// why.
func DeviceCount() (int, error) {
	var n C.int32_t
	err := call(func() C.weft_status { return C.weft_device_count(&n) })
	return int(n), err
}
