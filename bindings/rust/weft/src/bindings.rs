use std::marker::PhantomData;
use std::os::raw::c_void;

use weft_sys as sys;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::types::{DType, Element, Tensor, TensorKind};

struct Entry {
    tensor: Tensor,
    data: *mut c_void,
    dtype: DType,
    shape: Vec<i64>, // its heap buffer stays put when the Entry moves, so C may point into it
    writable: bool,
}

fn element_count(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |n, &d| {
        let d = usize::try_from(d).map_err(|_| Error::invalid(format!("negative dim {d} in shape {shape:?}")))?;
        n.checked_mul(d).ok_or_else(|| Error::invalid(format!("shape {shape:?} overflows")))
    })
}

fn c_entries(entries: &[Entry]) -> Vec<sys::weft_binding> {
    entries
        .iter()
        .map(|e| sys::weft_binding {
            tensor: e.tensor.raw(),
            value: sys::weft_tensor_view {
                data: e.data,
                dtype: e.dtype.raw(),
                rank: e.shape.len() as i32,
                shape: e.shape.as_ptr(),
                strides: std::ptr::null(), // dense row-major
            },
        })
        .collect()
}

/// Host slices bound to graph tensors for one reference run. The slices stay borrowed for `'a`: read-only
/// tensors (INPUT, WEIGHT) take `&[T]`, tensors the run writes (outputs, STATE) take `&mut [T]`.
/// Each slice's length must equal the product of its shape, so weft never reads or writes past it.
pub struct HostBindings<'a> {
    entries: Vec<Entry>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl Default for HostBindings<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> HostBindings<'a> {
    pub fn new() -> Self {
        HostBindings { entries: Vec::new(), _borrows: PhantomData }
    }

    fn push(
        &mut self,
        tensor: Tensor,
        data: *mut c_void,
        dtype: DType,
        len: usize,
        shape: &[i64],
        writable: bool,
    ) -> Result<&mut Self> {
        let n = element_count(shape)?;
        if n != len {
            return Err(Error::invalid(format!(
                "binding of tensor {:#x}: shape {shape:?} holds {n} elements but the slice has {len}",
                tensor.raw()
            )));
        }
        self.entries.push(Entry { tensor, data, dtype, shape: shape.to_vec(), writable });
        Ok(self)
    }

    /// Binds a tensor the run only reads (an INPUT or WEIGHT).
    pub fn read<T: Element>(&mut self, tensor: Tensor, data: &'a [T], shape: &[i64]) -> Result<&mut Self> {
        self.push(tensor, data.as_ptr() as *mut c_void, T::DTYPE, data.len(), shape, false)
    }

    /// Binds a tensor the run writes (an output, or a STATE tensor updated in place).
    pub fn write<T: Element>(&mut self, tensor: Tensor, data: &'a mut [T], shape: &[i64]) -> Result<&mut Self> {
        self.push(tensor, data.as_mut_ptr() as *mut c_void, T::DTYPE, data.len(), shape, true)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Refuses a shared slice bound to a tensor the run would write through it.
    pub(crate) fn check_writes(&self, graph: &Graph) -> Result<()> {
        for e in self.entries.iter().filter(|e| !e.writable) {
            // An id weft does not know is left for weft_graph_run_reference to report in its own words.
            if let Ok(info) = graph.tensor_info(e.tensor) {
                if info.is_output || info.kind == TensorKind::State {
                    return Err(Error::invalid(format!(
                        "tensor '{}' is written by the run (an output or STATE tensor): bind it with HostBindings::write",
                        info.name
                    )));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn to_c(&self) -> Vec<sys::weft_binding> {
        c_entries(&self.entries)
    }
}

/// A CUDA device address (CUdeviceptr).
pub type DevicePtr = u64;

/// Device memory bound to graph tensors for one program run: addresses the caller allocated (dense layout).
#[derive(Default)]
pub struct DeviceBindings {
    entries: Vec<Entry>,
}

impl DeviceBindings {
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `tensor` to `dtype` elements of `shape` at device address `ptr`.
    pub fn add(&mut self, tensor: Tensor, ptr: DevicePtr, dtype: DType, shape: &[i64]) -> &mut Self {
        self.entries.push(Entry { tensor, data: ptr as *mut c_void, dtype, shape: shape.to_vec(), writable: true });
        self
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn to_c(&self) -> Vec<sys::weft_binding> {
        c_entries(&self.entries)
    }
}
