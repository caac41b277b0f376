// The device library as libweft carries it (generated at build time by cmake/embed_device_library.cmake
// from src/device): the headers a generated kernel may include, two precompiled relocatable cubins per
// supported architecture (with and without the tensor-core tiles), and a version naming exactly these bytes.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace weft::devlib {

struct EmbeddedFile {
  const char* name;  // the name an #include uses, e.g. "weft_device.h"
  const char* data;
  size_t size;
};

struct EmbeddedBinary {
  const unsigned char* data;  // nullptr when the library is not embedded
  size_t size;
};

// Headers NVRTC may include: weft_device.h and what it includes, and common.cuh (inline helpers).
const std::vector<EmbeddedFile>& headers();

// The relocatable cubin of the device library `name`: the architecture ("sm_90a", ...) for the full library,
// with "_simt" appended for the one built without the tensor-core tiles (WEFT_DEVLIB_TENSOR_CORES=0), "_simt_f16"
// for that one with the one-row f16 tiles inlined instead of the bf16 ones (WEFT_DEVLIB_ONE_ROW_DTYPE), "_wide" for
// the full one built for the wide shared memory (WEFT_DEVLIB_WIDE_SMEM, sm_90 and later).
EmbeddedBinary library_cubin(std::string_view name);

// Hex digest over every device source and cubin.
const char* version();

}  // namespace weft::devlib
