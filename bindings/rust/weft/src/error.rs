use std::ffi::{CStr, CString};
use std::fmt;

use weft_sys as sys;

/// The non-OK values of `weft_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    InvalidHandle,
    OutOfMemory,
    Unsupported,
    Compile,
    Cuda,
    Cache,
    Deadlock,
    Io,
    Internal,
    /// A status this crate does not know (a newer library).
    Unknown(i32),
}

impl Status {
    pub fn from_raw(s: sys::weft_status) -> Self {
        match s {
            sys::WEFT_ERROR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::WEFT_ERROR_INVALID_HANDLE => Status::InvalidHandle,
            sys::WEFT_ERROR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::WEFT_ERROR_UNSUPPORTED => Status::Unsupported,
            sys::WEFT_ERROR_COMPILE => Status::Compile,
            sys::WEFT_ERROR_CUDA => Status::Cuda,
            sys::WEFT_ERROR_CACHE => Status::Cache,
            sys::WEFT_ERROR_DEADLOCK => Status::Deadlock,
            sys::WEFT_ERROR_IO => Status::Io,
            sys::WEFT_ERROR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        }
    }

    pub fn raw(self) -> sys::weft_status {
        match self {
            Status::InvalidArgument => sys::WEFT_ERROR_INVALID_ARGUMENT,
            Status::InvalidHandle => sys::WEFT_ERROR_INVALID_HANDLE,
            Status::OutOfMemory => sys::WEFT_ERROR_OUT_OF_MEMORY,
            Status::Unsupported => sys::WEFT_ERROR_UNSUPPORTED,
            Status::Compile => sys::WEFT_ERROR_COMPILE,
            Status::Cuda => sys::WEFT_ERROR_CUDA,
            Status::Cache => sys::WEFT_ERROR_CACHE,
            Status::Deadlock => sys::WEFT_ERROR_DEADLOCK,
            Status::Io => sys::WEFT_ERROR_IO,
            Status::Internal => sys::WEFT_ERROR_INTERNAL,
            Status::Unknown(s) => s,
        }
    }

    /// weft's name for the status, e.g. "WEFT_ERROR_INVALID_ARGUMENT".
    pub fn name(self) -> &'static str {
        // weft_status_string returns static storage.
        unsafe { CStr::from_ptr(sys::weft_status_string(self.raw())) }.to_str().unwrap_or("WEFT_STATUS_UNKNOWN")
    }
}

/// A failed weft call: the status and weft's message for it (`weft_last_error_message`), or a message of
/// this crate for arguments it rejects before calling weft (always `Status::InvalidArgument`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error { status, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(Status::InvalidArgument, message)
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status into a Result, reading the thread-local message right away (the next weft call on this
/// thread may replace it).
pub(crate) fn check(s: sys::weft_status) -> Result<()> {
    if s == sys::WEFT_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(sys::weft_last_error_message()) }.to_string_lossy().into_owned();
    Err(Error::new(Status::from_raw(s), message))
}

pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} {s:?} contains a NUL byte")))
}

/// "" becomes None so that weft generates a name (C's NULL).
pub(crate) fn c_name(s: &str) -> Result<Option<CString>> {
    if s.is_empty() {
        Ok(None)
    } else {
        c_string("name", s).map(Some)
    }
}

pub(crate) fn ptr_or_null(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// Copies a string weft owns (never NULL where this is used).
pub(crate) unsafe fn owned(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}
