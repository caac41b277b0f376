"""
    Weft.CUDADriver

The few CUDA driver calls needed to give a `Program` device memory. libcuda.so.1 is opened at run time, so
machines without a driver load Weft fine; `open_device` then throws an `ErrorException` saying why.
"""
module CUDADriver

using Libdl

const LIB = Ref{Ptr{Cvoid}}(C_NULL)
const SYMBOLS = Dict{Symbol,Ptr{Cvoid}}()

function sym(name::Symbol)
    get!(SYMBOLS, name) do
        p = Libdl.dlsym(LIB[], name; throw_error=false)
        p === nothing && error("libcuda.so.1 has no $name")
        p
    end
end

function check(what, r::Cint)
    r == 0 && return nothing
    s = Ref{Cstring}(C_NULL)
    name = ccall(sym(:cuGetErrorString), Cint, (Cint, Ptr{Cstring}), r, s) == 0 && s[] != C_NULL ?
           unsafe_string(s[]) : "unknown error"
    error("$what failed: CUDA error $r ($name)")
end

"""A device's primary context (the one weft uses for `Program(g; device_ordinal=d)` with d >= 0)."""
mutable struct Device
    ordinal::Cint
    context::Ptr{Cvoid}
end

"""Loads the driver, retains device `ordinal`'s primary context and makes it current."""
function open_device(ordinal::Integer=0)
    if LIB[] == C_NULL
        h = Libdl.dlopen("libcuda.so.1"; throw_error=false) # never closed: weft uses the same driver
        h === nothing && error("cannot load libcuda.so.1")
        LIB[] = h
    end
    check("cuInit", ccall(sym(:cuInit), Cint, (Cuint,), 0))
    dev = Ref{Cint}(0)
    check("cuDeviceGet", ccall(sym(:cuDeviceGet), Cint, (Ptr{Cint}, Cint), dev, ordinal))
    ctx = Ref{Ptr{Cvoid}}(C_NULL)
    check("cuDevicePrimaryCtxRetain", ccall(sym(:cuDevicePrimaryCtxRetain), Cint, (Ptr{Ptr{Cvoid}}, Cint), ctx, dev[]))
    d = Device(dev[], ctx[])
    make_current(d)
    return d
end

# The current context is per OS thread and a task may move between threads: every call below sets it first.
make_current(d::Device) = check("cuCtxSetCurrent", ccall(sym(:cuCtxSetCurrent), Cint, (Ptr{Cvoid},), d.context))

function Base.close(d::Device)
    d.context == C_NULL && return nothing
    ccall(sym(:cuDevicePrimaryCtxRelease_v2), Cint, (Cint,), d.ordinal)
    d.context = C_NULL
    return nothing
end

"""Device memory of `bytes` bytes, as a CUdeviceptr."""
function alloc(d::Device, bytes::Integer)
    make_current(d)
    p = Ref{UInt64}(0)
    check("cuMemAlloc_v2", ccall(sym(:cuMemAlloc_v2), Cint, (Ptr{UInt64}, Csize_t), p, max(bytes, 1)))
    return p[]
end

free(d::Device, p::UInt64) = (make_current(d); ccall(sym(:cuMemFree_v2), Cint, (UInt64,), p); nothing)

"""A new allocation holding a copy of `A`."""
function upload(d::Device, A::Array)
    p = alloc(d, sizeof(A))
    check("cuMemcpyHtoD_v2", ccall(sym(:cuMemcpyHtoD_v2), Cint, (UInt64, Ptr{Cvoid}, Csize_t), p, A, sizeof(A)))
    return p
end

"""Copies `sizeof(A)` bytes from device address `p` into `A`."""
function download!(A::Array, d::Device, p::UInt64)
    make_current(d)
    check("cuMemcpyDtoH_v2", ccall(sym(:cuMemcpyDtoH_v2), Cint, (Ptr{Cvoid}, UInt64, Csize_t), A, p, sizeof(A)))
    return A
end

end # module CUDADriver
