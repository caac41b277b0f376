// C API: the CPU reference interpreter and DLPack host views.
#include <dlpack/dlpack.h>

#include "capi/api_common.hpp"
#include "reference/interpreter.hpp"

using namespace weft;
using namespace weft::capi;

extern "C" {

weft_status weft_tensor_view_from_dlpack(const void* dltensor, weft_tensor_view* out) {
  return guard("weft_tensor_view_from_dlpack", [&] {
    if (!dltensor) invalid("'dltensor' is NULL; expected a DLTensor");
    const auto* dl = static_cast<const DLTensor*>(dltensor);
    require_out(out, "out");
    const auto dev = dl->device.device_type;
    if (dev != kDLCPU && dev != kDLCUDAHost && dev != kDLCUDA && dev != kDLCUDAManaged)
      invalid("DLTensor is on device type " + std::to_string(static_cast<int>(dev)) +
              "; expected kDLCPU or kDLCUDAHost (reference runs) or kDLCUDA / kDLCUDAManaged (programs)");
    if (dl->dtype.lanes != 1) invalid("DLTensor has " + std::to_string(dl->dtype.lanes) + " lanes; expected 1");
    weft_dtype dt;
    const int code = dl->dtype.code, bits = dl->dtype.bits;
    if (code == kDLBfloat && bits == 16) dt = WEFT_DTYPE_BF16;
    else if (code == kDLFloat && bits == 16) dt = WEFT_DTYPE_F16;
    else if (code == kDLFloat && bits == 32) dt = WEFT_DTYPE_F32;
    else if (code == kDLInt && bits == 32) dt = WEFT_DTYPE_I32;
    else if (code == kDLInt && bits == 64) dt = WEFT_DTYPE_I64;
    else
      invalid("DLTensor dtype (code " + std::to_string(code) + ", " + std::to_string(bits) +
              " bits) is not supported; expected bf16, f16, f32, i32 or i64");
    if (dl->ndim < 0 || dl->ndim > WEFT_MAX_RANK)
      invalid("DLTensor ndim " + std::to_string(dl->ndim) + " is out of range; expected 0 to " + std::to_string(WEFT_MAX_RANK));
    if (dl->ndim > 0 && !dl->shape) invalid("DLTensor shape is NULL");
    if (dl->byte_offset % (static_cast<uint64_t>(bits) / 8) != 0)
      invalid("DLTensor byte_offset " + std::to_string(dl->byte_offset) + " is not a multiple of the element size");
    out->data = static_cast<char*>(dl->data) + dl->byte_offset;
    out->dtype = dt;
    out->rank = dl->ndim;
    out->shape = dl->shape;
    out->strides = dl->strides;  // DLPack strides are in elements too; NULL means compact row-major
  });
}

weft_status weft_graph_run_reference(const weft_graph* graph, const weft_binding* bindings, int32_t num_bindings) {
  return guard("weft_graph_run_reference", [&] {
    live_graph(graph, "graph");
    if (num_bindings < 0) invalid("num_bindings is " + std::to_string(num_bindings) + "; expected >= 0");
    if (num_bindings > 0 && !bindings) invalid("bindings is NULL with num_bindings " + std::to_string(num_bindings));
    std::vector<HostBinding> hb;
    hb.reserve(static_cast<size_t>(num_bindings));
    for (int32_t i = 0; i < num_bindings; ++i) {
      const weft_binding& b = bindings[i];
      const std::string param = "bindings[" + std::to_string(i) + "].tensor";
      HostBinding h;
      h.tensor = decode_tensor(graph, b.tensor, param.c_str());
      if (h.tensor == kNoTensor) invalid(param + " is WEFT_TENSOR_NONE");
      h.view = to_view(b.value, graph->graph.tensor(h.tensor).name, i);
      hb.push_back(std::move(h));
    }
    run_reference(graph->graph, hb);
  });
}

}  // extern "C"
