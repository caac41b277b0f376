#include "gpu_test_util.hpp"

#include <algorithm>

namespace weft::test {

namespace {

// The largest integer value an input may hold: ids below the embedding's V, positions below the cache's S.
int64_t index_limit(const Graph& g, TensorId t, const std::vector<std::vector<int64_t>>& shapes, int64_t dflt) {
  int64_t limit = dflt;
  for (const Node& n : g.nodes())
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] != t) continue;
      if (n.op->name == "embedding" && k == 1) limit = std::min(limit, shapes[static_cast<size_t>(n.inputs[0])][0]);
      if (n.op->name == "attention_decode" && k == 5) limit = std::min(limit, shapes[static_cast<size_t>(n.inputs[3])][1]);
      if (n.op->name == "attention_decode_qkv" && k == 3) limit = std::min(limit, shapes[static_cast<size_t>(n.inputs[1])][1]);
    }
  return limit;
}

std::string where(const TensorDesc& t, int64_t k) { return "'" + t.name + "' element " + std::to_string(k); }

}  // namespace

std::vector<std::string> compare_with_reference(const Graph& g, const SymbolValues& values, const GpuCompareOptions& o) {
  GpuSession session;
  const auto& tensors = g.tensors();
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorDesc& t : tensors) shapes.push_back(resolve_shape(t.type.shape, values));
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Buffer> ref(tensors.size());
  std::vector<DeviceTensor> dev;
  dev.reserve(tensors.size());
  std::vector<DeviceBinding> bindings;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    const bool bound = t.kind != TensorKind::intermediate || t.is_output;
    if (!bound) {
      dev.emplace_back();
      continue;
    }
    Buffer b(t.type.dtype, shapes[i]);
    if (t.kind != TensorKind::intermediate) {
      const int64_t limit = index_limit(g, static_cast<TensorId>(i), shapes, o.max_index > 0 ? o.max_index : 16);
      for (int64_t k = 0; k < b.numel(); ++k)
        b.set(k, is_float(b.dtype) ? u(rng) : static_cast<double>(rng() % static_cast<uint64_t>(limit)));
      b.round_to_dtype();
      ref[i] = b;
    }
    dev.emplace_back(static_cast<size_t>(b.numel()) * dtype_size(b.dtype));
    if (t.kind == TensorKind::intermediate)
      dev.back().fill(0xff);  // poison: an element the kernel never writes reads back as NaN / -1
    else
      dev.back().upload(to_bytes(b));
    bindings.push_back(DeviceBinding{static_cast<TensorId>(i), TensorView{dev.back().data(), b.dtype, shapes[i], {}}});
  }

  std::vector<std::string> problems;
  ProgramOptions po;
  po.watchdog_ms = 10000;
  std::unique_ptr<Program> own;
  if (!o.program) own = std::make_unique<Program>(session.context(), g, po);
  Program& program = o.program ? *o.program : *own;
  for (int run = 0; run < o.runs; ++run) {
    evaluate(g, values, ref);
    program.run(bindings, nullptr);
    program.synchronize(nullptr);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    if (!(t.is_output || t.kind == TensorKind::state)) continue;
    const Buffer got = from_bytes(t.type.dtype, shapes[i], dev[i].download());
    const Buffer& want = ref[i];
    if (is_int(t.type.dtype)) {
      // argmax may pick another index when two reference values are within rounding of each other.
      const Node* producer = t.producer >= 0 ? &g.nodes()[static_cast<size_t>(t.producer)] : nullptr;
      for (int64_t k = 0; k < want.numel() && problems.size() < 20; ++k) {
        const int64_t w = want.i[static_cast<size_t>(k)], d = got.i[static_cast<size_t>(k)];
        if (w == d) continue;
        if (producer && producer->op->name == "argmax") {
          const Buffer& x = ref[static_cast<size_t>(producer->inputs[0])];
          const int64_t n = x.last();
          if (d >= 0 && d < n) {
            const double xd = x.get(k * n + d), xw = x.get(k * n + w);
            if (std::fabs(xd - xw) <= 0.02 * (1 + std::fabs(xw))) continue;
          }
        }
        problems.push_back(where(t, k) + ": device " + std::to_string(d) + ", reference " + std::to_string(w));
      }
      continue;
    }
    double scale = 0;
    for (float v : want.f) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    // Defaults: f32 differs only by summation order (relative ~1e-6 per op, a few ops chained); bf16/f16 may
    // round an intermediate the other way (2^-8 / 2^-11 relative), which later ops carry and amplify a little.
    const double rtol = o.rtol > 0 ? o.rtol : t.type.dtype == DType::f32 ? 2e-3 : t.type.dtype == DType::f16 ? 1e-2 : 4e-2;
    const double atol = (o.atol_scale > 0 ? o.atol_scale : rtol) * std::max(scale, 1e-3);
    int reported = 0;
    for (int64_t k = 0; k < want.numel(); ++k) {
      const double w = want.f[static_cast<size_t>(k)], d = got.f[static_cast<size_t>(k)];
      if (w == d || (std::isnan(w) && std::isnan(d))) continue;
      if (!(std::fabs(d - w) <= atol + rtol * std::fabs(w)) && reported++ < 5)
        problems.push_back(where(t, k) + ": device " + std::to_string(d) + ", reference " + std::to_string(w) +
                           " (tolerance " + std::to_string(atol + rtol * std::fabs(w)) + ")");
    }
  }
  return problems;
}

}  // namespace weft::test
