#include "reference/interpreter.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/half.hpp"

namespace weft {

namespace {

// Visits every element of a (shape, strides) view in row-major order: fn(linear index, element offset).
template <typename Fn>
void for_each_offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, Fn fn) {
  const int64_t n = element_count(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    fn(k, off);
    for (size_t d = shape.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

double load_element(const void* base, DType dtype, int64_t off) {
  const char* p = static_cast<const char*>(base) + off * static_cast<int64_t>(dtype_size(dtype));
  switch (dtype) {
    case DType::bf16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DType::f16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

void store_element(void* base, DType dtype, int64_t off, const Buffer& b, int64_t k) {
  char* p = static_cast<char*>(base) + off * static_cast<int64_t>(dtype_size(dtype));
  switch (dtype) {
    case DType::bf16: { const uint16_t h = f32_to_bf16(b.f[static_cast<size_t>(k)]); std::memcpy(p, &h, 2); break; }
    case DType::f16: { const uint16_t h = f32_to_f16(b.f[static_cast<size_t>(k)]); std::memcpy(p, &h, 2); break; }
    case DType::f32: std::memcpy(p, &b.f[static_cast<size_t>(k)], 4); break;
    case DType::i32: { const auto v = static_cast<int32_t>(b.i[static_cast<size_t>(k)]); std::memcpy(p, &v, 4); break; }
    case DType::i64: std::memcpy(p, &b.i[static_cast<size_t>(k)], 8); break;
  }
}

Buffer load(const TensorView& v) {
  Buffer b(v.dtype, v.shape);
  const auto strides = v.strides.empty() ? dense_strides(v.shape) : v.strides;
  if (v.dtype == DType::i64) {
    // Through double would lose ids above 2^53; copy exactly.
    for_each_offset(v.shape, strides, [&](int64_t k, int64_t off) {
      std::memcpy(&b.i[static_cast<size_t>(k)], static_cast<const char*>(v.data) + off * 8, 8);
    });
  } else {
    for_each_offset(v.shape, strides, [&](int64_t k, int64_t off) { b.set(k, load_element(v.data, v.dtype, off)); });
  }
  return b;
}

void store(const TensorView& v, const Buffer& b) {
  const auto strides = v.strides.empty() ? dense_strides(v.shape) : v.strides;
  for_each_offset(v.shape, strides, [&](int64_t k, int64_t off) { store_element(v.data, v.dtype, off, b, k); });
}

}  // namespace

void evaluate(const Graph& g, const SymbolValues& symbols, std::vector<Buffer>& values) {
  const auto& tensors = g.tensors();
  values.resize(tensors.size());
  for (const Node& n : g.nodes()) {
    const TensorDesc& out = tensors[static_cast<size_t>(n.output)];
    std::vector<Buffer*> ins;
    for (TensorId t : n.inputs) ins.push_back(t == kNoTensor ? nullptr : &values[static_cast<size_t>(t)]);
    Buffer& result = values[static_cast<size_t>(n.output)];
    result = Buffer(out.type.dtype, resolve_shape(out.type.shape, symbols));
    RefCtx ctx(*n.op, out.name, n.attrs, ins, result);
    n.op->reference(ctx);
    result.round_to_dtype();
    for (int w : n.op->writes_operands)
      if (static_cast<size_t>(w) < ins.size() && ins[static_cast<size_t>(w)]) ins[static_cast<size_t>(w)]->round_to_dtype();
  }
}

void run_reference(const Graph& g, std::span<const HostBinding> bindings) {
  g.validate();
  const auto& tensors = g.tensors();
  const BoundTensors bound = bind_tensors(g, bindings, "data");
  const SymbolValues& symbols = bound.symbols;

  std::vector<Buffer> values(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].kind != TensorKind::intermediate) values[i] = load(*bound.views[i]);
  evaluate(g, symbols, values);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].is_output || tensors[i].kind == TensorKind::state) store(*bound.views[i], values[i]);
}

}  // namespace weft
