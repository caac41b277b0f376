#include "runtime/launch_plan.hpp"

namespace weft {

int64_t compile_value(const std::vector<int64_t>& buckets, int64_t value) {
  if (value != 0)
    for (int64_t b : buckets)
      if (b >= value) return b;
  return value;
}

LaunchPlanTables make_launch_plan_tables(const Graph& g, const std::vector<std::vector<int64_t>>& buckets, uint32_t tag) {
  LaunchPlanTables t;
  t.tag = tag;
  for (const TensorDesc& d : g.tensors()) {
    LaunchPlanTables::Tensor x;
    x.bindable = d.kind != TensorKind::intermediate || d.is_output;
    x.is_output = d.is_output;
    x.dtype = static_cast<int32_t>(d.type.dtype);
    for (const Dim& dim : d.type.shape) x.dims.push_back(dim.is_fixed() ? dim.value : -1 - int64_t{dim.symbol});
    t.tensors.push_back(std::move(x));
  }
  for (size_t s = 0; s < g.symbols().size(); ++s) {
    const Symbol& sym = g.symbols().at(static_cast<int32_t>(s));
    t.symbols.push_back({sym.min, sym.max, s < buckets.size() ? buckets[s] : std::vector<int64_t>{}});
  }
  return t;
}

namespace {

int32_t report(int64_t* info, PlanError e, int64_t binding, int64_t tensor, int64_t dim, int64_t symbol) {
  info[0] = binding;
  info[1] = tensor;
  info[2] = dim;
  info[3] = symbol;
  return static_cast<int32_t>(e);
}

}  // namespace

int32_t run_launch_plan_reference(const LaunchPlanTables& tables, const PlanBinding* bindings, int32_t num_bindings,
                                  void** slots, int64_t* symbols, int64_t* compile_values, int64_t* error_info) {
  const auto num_tensors = static_cast<int64_t>(tables.tensors.size());
  for (int64_t t = 0; t < num_tensors; ++t) slots[t] = nullptr;
  for (size_t s = 0; s < tables.symbols.size(); ++s) symbols[s] = 0;

  for (int32_t i = 0; i < num_bindings; ++i) {
    const PlanBinding& b = bindings[i];
    const auto tag = static_cast<uint32_t>(static_cast<uint64_t>(b.tensor) >> 32);
    const int64_t index = static_cast<int64_t>(static_cast<uint64_t>(b.tensor) & 0xffffffffu) - 1;
    if (tag != tables.tag || index < 0 || index >= num_tensors) return report(error_info, PlanError::bad_tensor, i, -1, -1, -1);
    const LaunchPlanTables::Tensor& t = tables.tensors[static_cast<size_t>(index)];
    if (!t.bindable) return report(error_info, PlanError::not_bindable, i, index, -1, -1);
    if (slots[index]) return report(error_info, PlanError::bound_twice, i, index, -1, -1);
    if (!b.data) return report(error_info, PlanError::null_data, i, index, -1, -1);
    if (b.dtype != t.dtype) return report(error_info, PlanError::dtype, i, index, -1, -1);
    if (b.rank != static_cast<int32_t>(t.dims.size())) return report(error_info, PlanError::rank, i, index, -1, -1);
    for (int32_t d = 0; d < b.rank; ++d) {
      const int64_t want = t.dims[static_cast<size_t>(d)], got = b.shape[d];
      if (want > 0) {
        if (got != want) return report(error_info, PlanError::fixed_dim, i, index, d, -1);
      } else {
        const LaunchPlanTables::Symbol& s = tables.symbols[static_cast<size_t>(-1 - want)];
        if (got < s.min || got > s.max) return report(error_info, PlanError::symbol_range, i, index, d, -1 - want);
      }
    }
    if (b.strides) {
      int64_t dense = 1;
      for (int32_t d = b.rank - 1; d >= 0; --d) {
        if (b.strides[d] != dense) return report(error_info, PlanError::strides, i, index, d, -1);
        dense *= b.shape[d];
      }
    }
    slots[index] = b.data;
  }

  for (int64_t t = 0; t < num_tensors; ++t)
    if (tables.tensors[static_cast<size_t>(t)].bindable && !slots[t]) return report(error_info, PlanError::missing, -1, t, -1, -1);

  // Shapes were found bound above, so each bindable tensor's binding is the one whose data sits in its slot;
  // walk the bindings again per tensor to read its shape. Inputs first, as bind_tensors reports them.
  std::vector<const int64_t*> shape_of(static_cast<size_t>(num_tensors), nullptr);
  for (int32_t i = 0; i < num_bindings; ++i)
    shape_of[static_cast<size_t>((static_cast<uint64_t>(bindings[i].tensor) & 0xffffffffu) - 1)] = bindings[i].shape;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t t = 0; t < num_tensors; ++t) {
      const LaunchPlanTables::Tensor& x = tables.tensors[static_cast<size_t>(t)];
      if (!x.bindable || x.is_output != (pass == 1)) continue;
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (x.dims[d] > 0) continue;
        const auto s = static_cast<size_t>(-1 - x.dims[d]);
        const int64_t got = shape_of[static_cast<size_t>(t)][d];
        if (symbols[s] == 0) symbols[s] = got;
        else if (symbols[s] != got)
          return report(error_info, PlanError::symbol_mismatch, -1, t, static_cast<int64_t>(d), static_cast<int64_t>(s));
      }
    }

  for (size_t s = 0; s < tables.symbols.size(); ++s) compile_values[s] = compile_value(tables.symbols[s].buckets, symbols[s]);
  return 0;
}

}  // namespace weft
