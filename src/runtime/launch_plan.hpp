// The host side of one run, before the launch: check the caller's bindings against the graph, derive every
// symbol's value from the bound shapes, and pick the value each symbol is compiled for (its specialization).
// The rules are plain tables built once per program (LaunchPlanTables); run_launch_plan_reference interprets
// them, and the host JIT (src/host_jit) generates the same logic as machine code with the tables folded in.
// The two must agree on every input (tests/host_jit). On any error the caller re-checks the bindings with
// bind_tensors (graph/bindings.hpp) for a message that names the tensor and dim; the plan only says *that*
// and roughly *where* the bindings are wrong, so that the fast path formats no strings.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace weft {

// One binding, laid out exactly like the C API's weft_binding (checked by static_asserts in capi/) so that
// weft_program_run hands the caller's array straight to the plan.
struct PlanBinding {
  int64_t tensor;  // (tag << 32) | (tensor index + 1), as weft_tensor
  void* data;
  int32_t dtype;
  int32_t rank;
  const int64_t* shape;
  const int64_t* strides;  // nullptr: dense row-major; else must equal the dense strides exactly
};

// What the plan checks, in this order: per binding (in the caller's order) the tensor id, bindability,
// bound twice, null data, dtype, rank, each dim (fixed value, symbol range), strides; then every bindable
// tensor bound (ascending tensor index); then each symbol has one value everywhere (non-output tensors by
// ascending index, then outputs, dims ascending); then the compile values. The first failure is reported.
enum class PlanError : int32_t {
  ok = 0,
  bad_tensor = 1,         // id not of this graph (tag) or index out of range. info: binding
  not_bindable = 2,       // an intermediate. info: binding, tensor
  bound_twice = 3,        // info: binding, tensor
  null_data = 4,          // info: binding, tensor
  dtype = 5,              // info: binding, tensor
  rank = 6,               // info: binding, tensor
  fixed_dim = 7,          // a fixed dim bound with another size. info: binding, tensor, dim
  symbol_range = 8,       // a symbolic dim outside its symbol's range. info: binding, tensor, dim
  strides = 9,            // not dense. info: binding, tensor, dim
  missing = 10,           // info: -1, tensor
  symbol_mismatch = 11,   // a symbol with two values. info: -1, tensor, dim
};

// error_info written on failure: [0] binding index (-1 if none), [1] tensor index (-1), [2] dim (-1),
// [3] the symbol involved (-1).
inline constexpr int kPlanErrorInfoWords = 4;

struct LaunchPlanTables {
  uint32_t tag = 0;  // the high 32 bits every binding's tensor id must carry
  struct Tensor {
    bool bindable = false;  // input, weight, state or output
    bool is_output = false;
    int32_t dtype = 0;              // weft_dtype
    std::vector<int64_t> dims;      // > 0: fixed size; < 0: symbol (-1 - dims[i])
  };
  struct Symbol {
    int64_t min = 1, max = 1;
    // Ascending, last == max. Empty: compiled for the value itself (exact). A symbol's compile value is the
    // first bucket >= its value; one bucket {max} is the "runtime" policy.
    std::vector<int64_t> buckets;
  };
  std::vector<Tensor> tensors;
  std::vector<Symbol> symbols;
};

// Signature of a plan function (the reference below and the JIT-compiled one).
//   slots[num tensors]: set to each bound tensor's data, nullptr for the others (written on success and
//     failure alike; used as the "seen" marker while checking).
//   symbols[num symbols]: each symbol's value (0 where no bound tensor has it).
//   compile_values[num symbols]: the specialization (written on success only).
//   error_info[kPlanErrorInfoWords]: written on failure only.
// Returns a PlanError as int32. Never throws, never reads past `rank` entries of shape and strides.
using LaunchPlanFn = int32_t (*)(const PlanBinding* bindings, int32_t num_bindings, void** slots, int64_t* symbols,
                                 int64_t* compile_values, int64_t* error_info);

// The value a symbol with `value` is compiled for: the first of `buckets` >= value; the value itself when
// `buckets` is empty (exact) or the value is 0 (no bound tensor has the symbol).
int64_t compile_value(const std::vector<int64_t>& buckets, int64_t value);

// The tables of `g`: `buckets[s]` are symbol s's buckets (see Symbol::buckets), tag as above.
LaunchPlanTables make_launch_plan_tables(const Graph& g, const std::vector<std::vector<int64_t>>& buckets, uint32_t tag);

// The reference interpretation of the tables (same contract as LaunchPlanFn).
int32_t run_launch_plan_reference(const LaunchPlanTables& tables, const PlanBinding* bindings, int32_t num_bindings,
                                  void** slots, int64_t* symbols, int64_t* compile_values, int64_t* error_info);

}  // namespace weft
