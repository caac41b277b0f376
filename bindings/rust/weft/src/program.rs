use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use weft_sys as sys;

use crate::bindings::DeviceBindings;
use crate::error::{c_string, check, ptr_or_null, Error, Result};
use crate::graph::Graph;

/// Options of `Graph::compile` (weft_compile_options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// "sm_80", "sm_90a" or "sm_100a"; None means "sm_90a".
    pub arch: Option<String>,
    /// Queues / persistent blocks; 0 means the arch's usual SM count.
    pub num_sms: i32,
    /// Neither read nor write the kernel cache.
    pub disable_cache: bool,
}

/// What a compilation did (weft_compile_report).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileReport {
    pub num_tasks: i64,
    pub num_events: i64,
    pub num_queues: i64,
    pub arena_bytes: i64,
    pub cubin_bytes: i64,
    pub total_ms: f64,
    pub lower_ms: f64,
    pub compile_ms: f64,
    pub cache_hit: bool,
    /// The cache key, 32 hex digits.
    pub key: String,
}

impl CompileReport {
    pub(crate) fn raw_zeroed() -> sys::weft_compile_report {
        // SAFETY: all-zero is a valid weft_compile_report.
        let mut r: sys::weft_compile_report = unsafe { std::mem::zeroed() };
        r.struct_size = std::mem::size_of::<sys::weft_compile_report>();
        r
    }

    pub(crate) fn from_c(r: &sys::weft_compile_report) -> Self {
        CompileReport {
            num_tasks: r.num_tasks,
            num_events: r.num_events,
            num_queues: r.num_queues,
            arena_bytes: r.arena_bytes,
            cubin_bytes: r.cubin_bytes,
            total_ms: r.total_ms,
            lower_ms: r.lower_ms,
            compile_ms: r.compile_ms,
            cache_hit: r.cache_hit != 0,
            key: fixed_string(&r.key),
        }
    }
}

/// A NUL-terminated char array of a C struct; the whole array if weft left no NUL.
pub(crate) fn fixed_string(chars: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Number of CUDA devices; without a driver or GPU, an Error with status Cuda saying why.
pub fn device_count() -> Result<i32> {
    let mut n = 0;
    check(unsafe { sys::weft_device_count(&mut n) })?;
    Ok(n)
}

/// Options of `Program::new` (weft_program_options).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramOptions {
    /// >= 0: that device's primary context; -1: the calling thread's current context (or device 0).
    pub device_ordinal: i32,
    /// None: the device's own.
    pub arch: Option<String>,
    /// 0: $WEFT_WATCHDOG_MS, else 5000.
    pub watchdog_ms: i32,
    pub disable_cache: bool,
    /// Specializations kept loaded on the device (the least recently used unloaded beyond it); 0: 8.
    pub max_loaded_kernels: i32,
    /// A run whose specialization is not loaded yet runs on the generic kernel (every maskable symbol at its
    /// maximum) while the specialization compiles on a background thread, instead of waiting for the compile.
    pub lazy: bool,
}

impl Default for ProgramOptions {
    fn default() -> Self {
        ProgramOptions {
            device_ordinal: -1,
            arch: None,
            watchdog_ms: 0,
            disable_cache: false,
            max_loaded_kernels: 0,
            lazy: false,
        }
    }
}

/// What a program has done so far (weft_program_stats).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramStats {
    /// Specializations compiled (kernel cache misses).
    pub compiles: i64,
    /// Specializations loaded from the kernel cache.
    pub cache_loads: i64,
    /// Specializations unloaded to stay within `max_loaded_kernels`.
    pub evictions: i64,
    /// Lazy mode: runs served by the generic kernel while theirs compiled.
    pub generic_runs: i64,
    /// Specializations compiling in the background now.
    pub pending: i64,
    /// Specializations loaded now.
    pub loaded: i64,
    /// Runs are checked and planned by JIT-compiled host code (LLVM ORC).
    pub host_jit: bool,
    /// That code's object was loaded from the kernel cache.
    pub host_jit_cache_hit: bool,
    /// Generating + compiling (or loading) it, at program creation.
    pub host_jit_ms: f64,
}

impl ProgramStats {
    pub(crate) fn from_c(s: &sys::weft_program_stats) -> Self {
        ProgramStats {
            compiles: s.compiles,
            cache_loads: s.cache_loads,
            evictions: s.evictions,
            generic_runs: s.generic_runs,
            pending: s.pending,
            loaded: s.loaded,
            host_jit: s.host_jit != 0,
            host_jit_cache_hit: s.host_jit_cache_hit != 0,
            host_jit_ms: s.host_jit_ms,
        }
    }
}

/// A CUDA stream (CUstream) to run on; `Stream::DEFAULT` is the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(*mut c_void);

impl Stream {
    pub const DEFAULT: Stream = Stream(ptr::null_mut());

    /// # Safety
    /// `stream` must be a live CUstream of the program's context (or null) whenever it is used.
    pub unsafe fn from_raw(stream: *mut c_void) -> Self {
        Stream(stream)
    }

    pub fn as_raw(self) -> *mut c_void {
        self.0
    }
}

/// A graph compiled and loaded on a GPU (weft_program). Dropping it waits for its launches.
#[derive(Debug)]
pub struct Program {
    raw: NonNull<sys::weft_program>,
}

// weft serializes the calls on one program; `run` takes &mut self anyway, so one stream at a time.
unsafe impl Send for Program {}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe { sys::weft_program_destroy(self.raw.as_ptr()) }
    }
}

impl Program {
    /// Loads `graph` (copied) for a device; kernels are compiled per shape on first use.
    pub fn new(graph: &Graph, options: &ProgramOptions) -> Result<Self> {
        let arch = options.arch.as_deref().map(|a| c_string("arch", a)).transpose()?;
        let o = sys::weft_program_options {
            struct_size: std::mem::size_of::<sys::weft_program_options>(),
            device_ordinal: options.device_ordinal,
            arch: ptr_or_null(&arch),
            watchdog_ms: options.watchdog_ms,
            disable_cache: options.disable_cache as i32,
            max_loaded_kernels: options.max_loaded_kernels,
            lazy: options.lazy as i32,
        };
        let mut raw = ptr::null_mut();
        check(unsafe { sys::weft_program_create(graph.as_raw(), &o, &mut raw) })?;
        Ok(Program { raw: NonNull::new(raw).expect("weft_program_create returned OK and NULL") })
    }

    pub fn as_raw(&self) -> *mut sys::weft_program {
        self.raw.as_ptr()
    }

    /// Launches one run on `stream`. Asynchronous:
    /// device-side failures come from `synchronize`.
    ///
    /// # Safety
    /// Every address in `bindings` must point to device memory of the program's context holding at least
    /// the bound shape's elements, and stay valid (and not be written by others) until the run completes.
    pub unsafe fn run(&mut self, bindings: &DeviceBindings, stream: Stream) -> Result<()> {
        let raw = bindings.to_c();
        let n = i32::try_from(raw.len()).map_err(|_| Error::invalid("too many bindings"))?;
        check(sys::weft_program_run(self.raw.as_ptr(), raw.as_ptr(), n, stream.0))
    }

    /// What the program has done so far; background compiles that have finished are taken in first.
    pub fn stats(&self) -> Result<ProgramStats> {
        let mut s = sys::weft_program_stats {
            struct_size: std::mem::size_of::<sys::weft_program_stats>(),
            ..Default::default()
        };
        check(unsafe { sys::weft_program_get_stats(self.raw.as_ptr(), &mut s) })?;
        Ok(ProgramStats::from_c(&s))
    }

    /// Waits for `stream` and reports a device-side failure of an earlier run (DEADLOCK, INVALID_ARGUMENT).
    pub fn synchronize(&mut self, stream: Stream) -> Result<()> {
        check(unsafe { sys::weft_program_synchronize(self.raw.as_ptr(), stream.0) })
    }
}
