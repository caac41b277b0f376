// Generated CUDA source -> cubin: NVRTC compiles the (small) generated kernel to relocatable device code,
// nvJitLink links it with the device library, which was compiled once per architecture at build time and is
// embedded in libweft (src/compile/embedded_device_library.hpp). Only the generated part is compiled per
// JIT call. Thread-safe: every call uses its own NVRTC program and nvJitLink handle.
#pragma once

#include <string>
#include <vector>

namespace weft {

struct CompileOptions {
  std::string arch;                      // "sm_80", "sm_90a" or "sm_100a" (see supported_archs())
  bool line_info = false;                // -lineinfo for the generated part (profilers, sanitizer)
  std::vector<std::string> extra_flags;  // appended to NVRTC's options
  // Link the device library with the tensor-core tiles (gemv_mma.cuh); false: the one built without them,
  // whose task loop is smaller (fewer spills), only for kernels none of whose tasks can take them
  // (may_use_tensor_core_tiles in lower/task_graph.hpp): a fused linear tile sized for them fails without.
  bool tensor_cores = true;
  // With tensor_cores: link the library built for the wide shared memory ("<arch>_wide", sm_90 and later; the
  // kernel must then be launched with WEFT_SMEM_BYTES_WIDE; see lower_for_device in lower/task_graph.hpp).
  bool wide_smem = false;
  // Without tensor_cores: link the library whose task loop inlines the one-row f16 tiles ("<arch>_simt_f16")
  // instead of the bf16 ones ("<arch>_simt"); either runs every tile, the other dtype's out of line
  // (WEFT_DEVLIB_ONE_ROW_DTYPE, device/gemv_stream.cuh; lower: one_row_tiles_f16).
  bool one_row_f16 = false;
  // Without tensor_cores, bf16 one-row tiles, sm_90 on: the weight loader's library ("<arch>_simt_loader",
  // WEFT_DEVLIB_LOADER, device/weight_loader.cuh), whose kernel entry is its own (library_kernel, below), launched
  // with WEFT_SMEM_BYTES_LOADER (lower_for_weight_loader).
  bool weight_loader = false;
  // Without tensor_cores, bf16 one-row tiles, sm_90 on: the library with tagged hand-offs ("<arch>_simt_tagged",
  // WEFT_DEVLIB_TAGGED, device/tagged.cuh), for tables that tag some tensor (lower/tagged_handoffs.hpp).
  bool tagged = false;
};

// The device library a kernel compiled with `options` links: "<arch>", "<arch>_wide", "<arch>_simt",
// "<arch>_simt_f16", "<arch>_simt_loader" or "<arch>_simt_tagged".
std::string device_library_name(const CompileOptions& options);

struct CompiledKernel {
  std::vector<char> cubin;  // linked, loadable ELF for `arch`
  std::string log;          // NVRTC and nvJitLink messages (warnings), empty when both were silent
  double compile_ms = 0;    // NVRTC
  double link_ms = 0;       // nvJitLink
};

// Compiles `generated_source` (which includes "weft_device.h") for options.arch and links it with the
// device library. Throws weft::Error:
//   Status::unsupported  options.arch is not one of supported_archs();
//   Status::internal     options.weight_loader (that library has its own kernel entry: library_kernel);
//   Status::compile      NVRTC or nvJitLink failed; the message holds the full log.
// With $WEFT_DUMP_DIR set, writes <hash>_kernel.cu, <hash>_nvrtc.log and <hash>_nvjitlink.log there (and
// <hash>_kernel.cubin on success), <hash> being a short hash of the source and the options.
// With $WEFT_DEVICE_LIBRARY_DIR set (development: device code rebuilt elsewhere), the device library is read from
// <dir>/weft_devlib_<device_library_name(options)>.cubin instead of the embedded one; Status::io when that file is
// missing.
CompiledKernel compile_kernel(const std::string& generated_source, const CompileOptions& options);

// The kernel whose entry is the device library's own (options.weight_loader: device/loader_entry.cuh): the library
// linked alone by nvJitLink, nothing generated or compiled. Status::internal for a library that is linked with a
// generated kernel or is not embedded in this build; Status::compile and Status::io as compile_kernel (dumps and
// $WEFT_DEVICE_LIBRARY_DIR too).
CompiledKernel library_kernel(const CompileOptions& options);

// Hash of the embedded device library (sources and cubins): part of every cache key. With
// $WEFT_DEVICE_LIBRARY_DIR set, also of the cubins in that folder.
std::string device_library_version();
// "major.minor" of the NVRTC / nvJitLink libraries loaded at run time.
std::string nvrtc_version();
std::string nvjitlink_version();
// The architectures the device library is built for.
std::vector<std::string> supported_archs();

}  // namespace weft
