//! The few CUDA driver calls needed to give a `Program` device memory: libcuda.so.1 is opened at run time
//! (dlopen), so nothing links against CUDA and machines without a driver still load this crate.
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::mem::size_of_val;

use crate::error::{Error, Result, Status};
use crate::types::Element;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}
const RTLD_NOW: c_int = 2;

type CuResult = c_int;

struct Fns {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    primary_retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult,
    primary_release: unsafe extern "C" fn(c_int) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

unsafe fn sym<F: Copy>(lib: *mut c_void, name: &str) -> Result<F> {
    let c = CString::new(name).unwrap();
    let p = dlsym(lib, c.as_ptr());
    if p.is_null() {
        return Err(Error::new(Status::Cuda, format!("libcuda.so.1 has no {name}")));
    }
    // SAFETY: F is one of the function pointer types above, with the driver's C signature for `name`.
    Ok(std::mem::transmute_copy(&p))
}

/// The driver with device `ordinal`'s primary context (the one weft uses for `device_ordinal >= 0`).
pub struct Driver {
    f: Fns,
    device: c_int,
    context: *mut c_void,
}

impl Driver {
    /// Loads libcuda.so.1, initializes it and makes the device's primary context current on this thread.
    pub fn open(ordinal: i32) -> Result<Self> {
        unsafe {
            let name = CString::new("libcuda.so.1").unwrap();
            let lib = dlopen(name.as_ptr(), RTLD_NOW); // never closed: the driver stays loaded for weft too
            if lib.is_null() {
                let why = CStr::from_ptr(dlerror()).to_string_lossy().into_owned();
                return Err(Error::new(Status::Cuda, format!("cannot load libcuda.so.1: {why}")));
            }
            let f = Fns {
                init: sym(lib, "cuInit")?,
                device_get: sym(lib, "cuDeviceGet")?,
                primary_retain: sym(lib, "cuDevicePrimaryCtxRetain")?,
                primary_release: sym(lib, "cuDevicePrimaryCtxRelease_v2")?,
                ctx_set_current: sym(lib, "cuCtxSetCurrent")?,
                ctx_synchronize: sym(lib, "cuCtxSynchronize")?,
                mem_alloc: sym(lib, "cuMemAlloc_v2")?,
                mem_free: sym(lib, "cuMemFree_v2")?,
                htod: sym(lib, "cuMemcpyHtoD_v2")?,
                dtoh: sym(lib, "cuMemcpyDtoH_v2")?,
                error_string: sym(lib, "cuGetErrorString")?,
            };
            let mut d = Driver { f, device: -1, context: std::ptr::null_mut() };
            d.check("cuInit", (d.f.init)(0))?;
            let mut device = 0;
            d.check("cuDeviceGet", (d.f.device_get)(&mut device, ordinal))?;
            let mut context = std::ptr::null_mut();
            d.check("cuDevicePrimaryCtxRetain", (d.f.primary_retain)(&mut context, device))?;
            d.device = device; // from here on Drop releases the context
            d.context = context;
            d.make_current()?;
            Ok(d)
        }
    }

    fn check(&self, what: &str, r: CuResult) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        let mut s: *const c_char = std::ptr::null();
        let name = unsafe {
            if (self.f.error_string)(r, &mut s) == 0 && !s.is_null() {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            } else {
                "unknown error".into()
            }
        };
        Err(Error::new(Status::Cuda, format!("{what} failed: CUDA error {r} ({name})")))
    }

    /// Makes the primary context current on the calling thread (each thread that allocates needs it).
    pub fn make_current(&self) -> Result<()> {
        self.check("cuCtxSetCurrent", unsafe { (self.f.ctx_set_current)(self.context) })
    }

    pub fn synchronize(&self) -> Result<()> {
        self.check("cuCtxSynchronize", unsafe { (self.f.ctx_synchronize)() })
    }

    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer<'_>> {
        let mut ptr = 0u64;
        self.check("cuMemAlloc_v2", unsafe { (self.f.mem_alloc)(&mut ptr, bytes.max(1)) })?;
        Ok(DeviceBuffer { driver: self, ptr, bytes })
    }

    /// A new buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer<'_>> {
        let mut b = self.alloc(size_of_val(data))?;
        b.copy_from(data)?;
        Ok(b)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.device >= 0 {
            unsafe { (self.f.primary_release)(self.device) };
        }
    }
}

/// Device memory freed on drop.
pub struct DeviceBuffer<'d> {
    driver: &'d Driver,
    ptr: u64,
    bytes: usize,
}

impl DeviceBuffer<'_> {
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn copy_from<T: Element>(&mut self, data: &[T]) -> Result<()> {
        let n = size_of_val(data);
        if n > self.bytes {
            return Err(Error::invalid(format!("copy of {n} bytes into a buffer of {}", self.bytes)));
        }
        self.driver.check("cuMemcpyHtoD_v2", unsafe { (self.driver.f.htod)(self.ptr, data.as_ptr().cast(), n) })
    }

    pub fn copy_to<T: Element>(&self, data: &mut [T]) -> Result<()> {
        let n = size_of_val(data);
        if n > self.bytes {
            return Err(Error::invalid(format!("copy of {n} bytes out of a buffer of {}", self.bytes)));
        }
        self.driver.check("cuMemcpyDtoH_v2", unsafe { (self.driver.f.dtoh)(data.as_mut_ptr().cast(), self.ptr, n) })
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        unsafe { (self.driver.f.mem_free)(self.ptr) };
    }
}
