//! Safe Rust API over weft's C API (include/weft/weft.h): RAII handles that release themselves on drop,
//! `Result<T, weft::Error>` carrying weft's status and message, and host tensor views that borrow slices.
//!
//! ```no_run
//! use weft::{dims, Context, DType, Graph, HostBindings};
//! let ctx = Context::new()?;
//! let mut g = Graph::new(&ctx, "scale")?;
//! g.declare_symbol("batch", 1, 8)?;
//! let x = g.input("x", DType::F32, &dims!["batch", 4])?;
//! let y = g.silu(x, "y")?;
//! g.mark_output(y, "")?;
//! let xv = [1.0f32; 8];
//! let mut yv = [0.0f32; 8];
//! let mut b = HostBindings::new();
//! b.read(x, &xv, &[2, 4])?.write(y, &mut yv, &[2, 4])?;
//! g.run_reference(&b)?;
//! # Ok::<(), weft::Error>(())
//! ```
pub use weft_sys as sys;

mod bindings;
pub mod cuda;
mod error;
mod graph;
mod model;
mod program;
mod types;

pub use bindings::{DeviceBindings, DevicePtr, HostBindings};
pub use error::{Error, Result, Status};
pub use graph::{op_names, Context, Graph};
pub use model::{Backend, GenerateRequest, Generation, Model, ModelInfo, ModelOptions};
pub use program::{device_count, CompileOptions, CompileReport, Program, ProgramOptions, ProgramStats, Stream};
pub use types::*;

/// The loaded library's version as WEFT_VERSION encodes it (0.1.0 -> 100).
pub fn version() -> i32 {
    unsafe { sys::weft_version() }
}

/// The loaded library's version, "MAJOR.MINOR.PATCH".
pub fn version_string() -> String {
    unsafe { std::ffi::CStr::from_ptr(sys::weft_version_string()) }.to_string_lossy().into_owned()
}
