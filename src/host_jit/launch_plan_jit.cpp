// The launch plan as machine code. The IR is the reference interpreter (runtime/launch_plan.cpp) with the
// tables folded in: a loop over the bindings whose `switch` on the tensor index jumps to straight-line checks
// with that tensor's dtype, rank, dims and symbol ranges as constants, then the missing-tensor checks, the
// symbol agreement and the bucket choice unrolled in the reference's order. ORC's LLJIT compiles it with
// codegen at -O2 and no IR passes: the IR is emitted already simple (SSA values, constants folded, nothing
// to promote), and codegen time, about proportional to the IR's size, is what a cold start pays for.
//
// The graph's tag is not folded in: it lives in a global of the object that is written after loading, so
// that one cached object serves every process whatever tag its graph got.
#include "host_jit/launch_plan_jit.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "host_jit/jit_object_cache.hpp"

namespace weft {
namespace {

// Part of the object cache key: bump it whenever the generated IR or how it is compiled changes.
constexpr int kHostJitCodegenVersion = 1;
constexpr llvm::CodeGenOpt::Level kCodegenOpt = llvm::CodeGenOpt::Default;  // -O2
constexpr const char* kCompileOptions = "codegen -O2, no IR passes";
constexpr const char* kPlanFunction = "weft_launch_plan";
constexpr const char* kTagGlobal = "weft_launch_plan_tag";

[[noreturn]] void llvm_fail(const std::string& what, llvm::Error err) {
  fail(Status::internal, "host JIT: " + what + ": " + llvm::toString(std::move(err)));
}

template <class T>
T take(llvm::Expected<T> value, const std::string& what) {
  if (!value) llvm_fail(what, value.takeError());
  return std::move(*value);
}

void check(llvm::Error err, const std::string& what) {
  if (err) llvm_fail(what, std::move(err));
}

// The native target, initialized once per process; `arch` names it in cache keys.
struct HostTarget {
  std::optional<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::string arch;   // triple, CPU and features: an object is only reused on a host that can run it
  std::string error;  // why there is no native target
};

const HostTarget& host_target() {
  static HostTarget host;
  static std::once_flag once;
  std::call_once(once, [] {
    if (llvm::InitializeNativeTarget() || llvm::InitializeNativeTargetAsmPrinter()) {
      host.error = "LLVM has no native target for this host";
      return;
    }
    llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      host.error = llvm::toString(jtmb.takeError());
      return;
    }
    jtmb->setCodeGenOptLevel(kCodegenOpt);
    host.arch = jtmb->getTargetTriple().str() + " " + jtmb->getCPU() + " " + jtmb->getFeatures().getString();
    host.jtmb = std::move(*jtmb);
  });
  if (!host.jtmb) fail(Status::internal, "host JIT: " + host.error);
  return host;
}

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Everything the generated code depends on (the tables, less the tag), hashed like a graph.
cache::CacheKey plan_cache_key(const LaunchPlanTables& tables, const std::string& arch) {
  std::string bytes = "weft-host-plan-tables/1";
  append_u64(bytes, tables.tensors.size());
  for (const LaunchPlanTables::Tensor& t : tables.tensors) {
    append_u64(bytes, (t.bindable ? 1u : 0u) | (t.is_output ? 2u : 0u));
    append_u64(bytes, static_cast<uint64_t>(static_cast<int64_t>(t.dtype)));
    append_u64(bytes, t.dims.size());
    for (int64_t d : t.dims) append_u64(bytes, static_cast<uint64_t>(d));
  }
  append_u64(bytes, tables.symbols.size());
  for (const LaunchPlanTables::Symbol& s : tables.symbols) {
    append_u64(bytes, static_cast<uint64_t>(s.min));
    append_u64(bytes, static_cast<uint64_t>(s.max));
    append_u64(bytes, s.buckets.size());
    for (int64_t b : s.buckets) append_u64(bytes, static_cast<uint64_t>(b));
  }
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  cache::KeyParts parts;
  parts.graph_hash = {h.low64, h.high64};
  parts.specialization = "host-plan";
  parts.target_arch = arch;
  parts.compile_options = std::string(kCompileOptions) + ", host-jit codegen " + std::to_string(kHostJitCodegenVersion);
  parts.weft_version = kVersionString;
  parts.nvrtc_version = "LLVM " LLVM_VERSION_STRING;
  return cache::make_key(parts);
}

// ---- IR ------------------------------------------------------------------------------------------------

// Codegen time is about proportional to the IR's size, so tensors with the same dtype and dims (a model's
// layers repeat a few shapes) share one copy of the checks, with the tensor index a run-time value. A group
// of checks is computed without branches and ends in one unlikely branch to a block that works out, with
// selects, which check failed first in the reference's order. The shape is read only where the reference
// reads it: after a failed header check the loads read a stand-in array of zeros, their results ignored.
class PlanCodegen {
 public:
  PlanCodegen(const LaunchPlanTables& tables, llvm::Module& module)
      : t_(tables), m_(module), ctx_(module.getContext()), b_(ctx_) {}

  void emit();

 private:
  using Value = llvm::Value;

  llvm::ConstantInt* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::ConstantInt* i64(size_t v) { return b_.getInt64(v); }
  llvm::ConstantInt* code(PlanError e) { return b_.getInt32(static_cast<uint32_t>(e)); }
  Value* at(llvm::Type* type, Value* base, uint64_t index) { return b_.CreateConstInBoundsGEP1_64(type, base, index); }
  Value* field(Value* binding, unsigned index, llvm::Type* type, const char* name) {
    return b_.CreateLoad(type, b_.CreateStructGEP(binding_ty_, binding, index), name);
  }
  llvm::BasicBlock* block(const char* name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }
  Value* any(const std::vector<Value*>& flags) {
    Value* r = nullptr;
    for (Value* f : flags) r = r ? b_.CreateOr(r, f) : f;
    return r ? r : b_.getFalse();
  }
  // Branches to a new block if `bad` (left as the insert point, for the caller to explain), else to `ok`.
  void branch_if_bad(Value* bad, llvm::BasicBlock* ok) {
    llvm::BasicBlock* explain = block("bad");
    b_.CreateCondBr(bad, explain, ok, unlikely_);
    b_.SetInsertPoint(explain);
  }
  // Ends the current block: error_info, then return the code.
  void exit_failed(Value* code_value, Value* binding, Value* tensor, Value* dim, Value* symbol) {
    const std::array<Value*, kPlanErrorInfoWords> words = {binding, tensor, dim, symbol};
    for (size_t w = 0; w < words.size(); ++w) b_.CreateStore(words[w], at(i64_ty_, error_info_, w));
    b_.CreateRet(code_value);
  }
  void emit_tensor(const LaunchPlanTables::Tensor& x, Value* binding, Value* binding_index, Value* index,
                   llvm::BasicBlock* accept);
  void emit_missing();
  void emit_symbols();

  const LaunchPlanTables& t_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::StructType* binding_ty_ = nullptr;
  llvm::Type* i64_ty_ = nullptr;
  llvm::PointerType* i64p_ty_ = nullptr;
  llvm::PointerType* i8p_ty_ = nullptr;
  Value *slots_ = nullptr, *symbols_ = nullptr, *compile_values_ = nullptr, *error_info_ = nullptr;
  llvm::AllocaInst* shape_of_ = nullptr;  // [num tensors x i64*]: the shape each tensor was bound with
  Value* zeros_ = nullptr;                // i64* to max-rank zeros: the stand-in shape
  llvm::MDNode* unlikely_ = nullptr;
};

// The checks of a bindable tensor `index` of this dtype and dims (the binding's tag and index already
// matched); on success on to `accept`. Tensors with the same dtype and dims share them.
void PlanCodegen::emit_tensor(const LaunchPlanTables::Tensor& x, Value* binding, Value* bi, Value* index,
                              llvm::BasicBlock* accept) {
  const size_t rank = x.dims.size();
  const std::array<std::pair<Value*, PlanError>, 4> header = {{
      {b_.CreateIsNotNull(b_.CreateLoad(i8p_ty_, b_.CreateInBoundsGEP(i8p_ty_, slots_, index))), PlanError::bound_twice},
      {b_.CreateIsNull(field(binding, 1, i8p_ty_, "data")), PlanError::null_data},
      {b_.CreateICmpNE(field(binding, 2, b_.getInt32Ty(), "dtype"), b_.getInt32(static_cast<uint32_t>(x.dtype))), PlanError::dtype},
      {b_.CreateICmpNE(field(binding, 3, b_.getInt32Ty(), "rank"), b_.getInt32(static_cast<uint32_t>(rank))), PlanError::rank},
  }};
  Value* bad = any({header[0].first, header[1].first, header[2].first, header[3].first});
  std::vector<Value*> dim_bad(rank);
  std::vector<Value*> size(rank);  // each dim's size: a constant where fixed
  if (rank > 0) {
    Value* shape = b_.CreateSelect(bad, zeros_, field(binding, 4, i64p_ty_, "shape"));
    for (size_t d = 0; d < rank; ++d) {
      const int64_t want = x.dims[d];
      Value* got = b_.CreateLoad(i64_ty_, at(i64_ty_, shape, d));
      if (want > 0) {
        dim_bad[d] = b_.CreateICmpNE(got, i64(want));
        size[d] = i64(want);
      } else {
        const LaunchPlanTables::Symbol& s = t_.symbols[static_cast<size_t>(-1 - want)];
        dim_bad[d] = b_.CreateOr(b_.CreateICmpSLT(got, i64(s.min)), b_.CreateICmpSGT(got, i64(s.max)));
        size[d] = got;
      }
    }
    bad = b_.CreateOr(bad, any(dim_bad));
  }
  llvm::BasicBlock* shape_ok = rank > 0 ? block("shape_ok") : accept;
  branch_if_bad(bad, shape_ok);
  // The first failure: from the last check in the reference's order back to the first, each overriding.
  Value* code_value = code(PlanError::fixed_dim);
  Value* dim = i64(int64_t{-1});
  Value* symbol = i64(int64_t{-1});
  for (size_t d = rank; d-- > 0;) {
    const bool fixed = x.dims[d] > 0;
    code_value = b_.CreateSelect(dim_bad[d], code(fixed ? PlanError::fixed_dim : PlanError::symbol_range), code_value);
    dim = b_.CreateSelect(dim_bad[d], i64(d), dim);
    symbol = b_.CreateSelect(dim_bad[d], i64(fixed ? int64_t{-1} : -1 - x.dims[d]), symbol);
  }
  for (size_t h = header.size(); h-- > 0;) {
    code_value = b_.CreateSelect(header[h].first, code(header[h].second), code_value);
    dim = b_.CreateSelect(header[h].first, i64(int64_t{-1}), dim);
    symbol = b_.CreateSelect(header[h].first, i64(int64_t{-1}), symbol);
  }
  exit_failed(code_value, bi, index, dim, symbol);
  if (rank == 0) return;

  // Strides: none means dense (the usual case: no work); given ones must be exactly the dense ones, checked
  // from the last dim down.
  b_.SetInsertPoint(shape_ok);
  Value* strides = field(binding, 5, i64p_ty_, "strides");
  llvm::BasicBlock* given = block("strides");
  b_.CreateCondBr(b_.CreateIsNull(strides), accept, given);
  b_.SetInsertPoint(given);
  std::vector<Value*> stride_bad(rank);
  Value* dense = i64(int64_t{1});
  for (size_t d = rank; d-- > 0;) {
    stride_bad[d] = b_.CreateICmpNE(b_.CreateLoad(i64_ty_, at(i64_ty_, strides, d)), dense);
    if (d > 0) dense = b_.CreateMul(dense, size[d]);  // wraps like the reference's int64 product
  }
  branch_if_bad(any(stride_bad), accept);
  dim = i64(int64_t{-1});
  for (size_t d = 0; d < rank; ++d) dim = b_.CreateSelect(stride_bad[d], i64(d), dim);
  exit_failed(code(PlanError::strides), bi, index, dim, i64(int64_t{-1}));
}

// After the loop: every bindable tensor bound (the lowest missing index is reported).
void PlanCodegen::emit_missing() {
  std::vector<std::pair<size_t, Value*>> missing;
  for (size_t t = 0; t < t_.tensors.size(); ++t)
    if (t_.tensors[t].bindable) missing.emplace_back(t, b_.CreateIsNull(b_.CreateLoad(i8p_ty_, at(i8p_ty_, slots_, t))));
  if (missing.empty()) return;
  std::vector<Value*> flags;
  for (auto& [t, flag] : missing) flags.push_back(flag);
  llvm::BasicBlock* next = block("all_bound");
  branch_if_bad(any(flags), next);
  Value* tensor = i64(int64_t{-1});
  for (size_t k = missing.size(); k-- > 0;) tensor = b_.CreateSelect(missing[k].second, i64(missing[k].first), tensor);
  exit_failed(code(PlanError::missing), i64(int64_t{-1}), tensor, i64(int64_t{-1}), i64(int64_t{-1}));
  b_.SetInsertPoint(next);
}

// Each symbol one value: occurrences in the reference's order (non-outputs by index, then outputs). After the
// first disagreement nothing changes any more, so that the values stored are those the reference leaves.
void PlanCodegen::emit_symbols() {
  std::vector<Value*> value(t_.symbols.size(), nullptr);  // nullptr: no tensor has set it yet (statically 0)
  Value* failed = nullptr;                                // nullptr: no disagreement possible so far
  Value *fail_tensor = i64(int64_t{-1}), *fail_dim = fail_tensor, *fail_symbol = fail_tensor;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t t = 0; t < t_.tensors.size(); ++t) {
      const LaunchPlanTables::Tensor& x = t_.tensors[t];
      if (!x.bindable || x.is_output != (pass == 1)) continue;
      Value* shape = nullptr;
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (x.dims[d] > 0) continue;
        const auto s = static_cast<size_t>(-1 - x.dims[d]);
        if (!shape) shape = b_.CreateLoad(i64p_ty_, b_.CreateConstInBoundsGEP2_64(shape_of_->getAllocatedType(), shape_of_, 0, t));
        Value* got = b_.CreateLoad(i64_ty_, at(i64_ty_, shape, d));
        if (!value[s]) {
          value[s] = failed ? b_.CreateSelect(failed, i64(int64_t{0}), got) : got;
          continue;
        }
        // A symbol still 0 takes this value (the reference's "symbols[s] == 0"); else the two must agree.
        Value* live = failed ? b_.CreateNot(failed) : b_.getTrue();
        Value* unset = b_.CreateICmpEQ(value[s], i64(int64_t{0}));
        Value* mismatch = b_.CreateAnd(live, b_.CreateAnd(b_.CreateNot(unset), b_.CreateICmpNE(value[s], got)));
        fail_tensor = b_.CreateSelect(mismatch, i64(t), fail_tensor);
        fail_dim = b_.CreateSelect(mismatch, i64(d), fail_dim);
        fail_symbol = b_.CreateSelect(mismatch, i64(s), fail_symbol);
        value[s] = b_.CreateSelect(b_.CreateAnd(live, unset), got, value[s]);
        failed = failed ? b_.CreateOr(failed, mismatch) : mismatch;
      }
    }
  auto store_symbols = [&] {
    for (size_t s = 0; s < value.size(); ++s)
      if (value[s]) b_.CreateStore(value[s], at(i64_ty_, symbols_, s));
  };
  if (failed) {
    llvm::BasicBlock* next = block("agreed");
    branch_if_bad(failed, next);
    store_symbols();
    exit_failed(code(PlanError::symbol_mismatch), i64(int64_t{-1}), fail_tensor, fail_dim, fail_symbol);
    b_.SetInsertPoint(next);
  }
  store_symbols();
  // The compile value: the first bucket >= the value (in list order), else the value; 0 stays 0.
  for (size_t s = 0; s < t_.symbols.size(); ++s) {
    Value* v = value[s] ? value[s] : i64(int64_t{0});
    const std::vector<int64_t>& buckets = t_.symbols[s].buckets;
    if (value[s] && !buckets.empty()) {
      Value* chosen = v;
      for (size_t k = buckets.size(); k-- > 0;)
        chosen = b_.CreateSelect(b_.CreateICmpSLE(v, i64(buckets[k])), i64(buckets[k]), chosen);
      v = b_.CreateSelect(b_.CreateICmpEQ(v, i64(int64_t{0})), v, chosen);
    }
    b_.CreateStore(v, at(i64_ty_, compile_values_, s));
  }
  b_.CreateRet(b_.getInt32(0));
}

void PlanCodegen::emit() {
  i64_ty_ = b_.getInt64Ty();
  i64p_ty_ = llvm::PointerType::getUnqual(i64_ty_);
  i8p_ty_ = b_.getInt8PtrTy();
  binding_ty_ = llvm::StructType::create(ctx_, {i64_ty_, i8p_ty_, b_.getInt32Ty(), b_.getInt32Ty(), i64p_ty_, i64p_ty_},
                                         "weft.plan_binding");
  const llvm::StructLayout* layout = m_.getDataLayout().getStructLayout(binding_ty_);
  if (layout->getSizeInBytes() != sizeof(PlanBinding) || layout->getElementOffset(1) != offsetof(PlanBinding, data) ||
      layout->getElementOffset(2) != offsetof(PlanBinding, dtype) || layout->getElementOffset(3) != offsetof(PlanBinding, rank) ||
      layout->getElementOffset(4) != offsetof(PlanBinding, shape) || layout->getElementOffset(5) != offsetof(PlanBinding, strides))
    fail(Status::internal, "host JIT: the target's layout of weft_binding differs from the host compiler's");
  auto* fn_ty = llvm::FunctionType::get(
      b_.getInt32Ty(),
      {llvm::PointerType::getUnqual(binding_ty_), b_.getInt32Ty(), llvm::PointerType::getUnqual(i8p_ty_), i64p_ty_, i64p_ty_, i64p_ty_},
      false);
  fn_ = llvm::Function::Create(fn_ty, llvm::Function::ExternalLinkage, kPlanFunction, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  Value* bindings = fn_->getArg(0);
  Value* num_bindings = fn_->getArg(1);
  slots_ = fn_->getArg(2);
  symbols_ = fn_->getArg(3);
  compile_values_ = fn_->getArg(4);
  error_info_ = fn_->getArg(5);
  auto* tag_global = new llvm::GlobalVariable(m_, b_.getInt32Ty(), false, llvm::GlobalValue::ExternalLinkage,
                                              b_.getInt32(0), kTagGlobal);
  size_t max_rank = 1;
  for (const LaunchPlanTables::Tensor& x : t_.tensors) max_rank = std::max(max_rank, x.dims.size());
  auto* zeros_ty = llvm::ArrayType::get(i64_ty_, max_rank);
  auto* zeros = new llvm::GlobalVariable(m_, zeros_ty, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantAggregateZero::get(zeros_ty), "zeros");
  zeros_ = llvm::ConstantExpr::getInBoundsGetElementPtr(zeros_ty, zeros, llvm::ArrayRef<llvm::Constant*>{i64(int64_t{0}), i64(int64_t{0})});
  unlikely_ = llvm::MDBuilder(ctx_).createBranchWeights(1, 1u << 20);
  const size_t num_tensors = t_.tensors.size();

  llvm::BasicBlock* entry = block("entry");
  b_.SetInsertPoint(entry);
  bool any_symbolic = false;
  for (const LaunchPlanTables::Tensor& x : t_.tensors)
    for (int64_t d : x.dims) any_symbolic = any_symbolic || (x.bindable && d < 0);
  if (any_symbolic) shape_of_ = b_.CreateAlloca(llvm::ArrayType::get(i64p_ty_, num_tensors), nullptr, "shape_of");
  if (num_tensors > 0) b_.CreateMemSet(slots_, b_.getInt8(0), num_tensors * sizeof(void*), llvm::MaybeAlign(8));
  for (size_t s = 0; s < t_.symbols.size(); ++s) b_.CreateStore(i64(int64_t{0}), at(i64_ty_, symbols_, s));
  Value* tag = b_.CreateLoad(b_.getInt32Ty(), tag_global, "tag");
  llvm::BasicBlock* header = block("loop");
  llvm::BasicBlock* body = block("binding");
  llvm::BasicBlock* after = block("bound");
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt32Ty(), 2, "i");
  i->addIncoming(b_.getInt32(0), entry);
  b_.CreateCondBr(b_.CreateICmpSLT(i, num_bindings), body, after);

  // The tensor id: the tag in the high half, index + 1 in the low half (0 and > num tensors are no tensor).
  b_.SetInsertPoint(body);
  Value* bi = b_.CreateSExt(i, i64_ty_, "bi");
  Value* binding = b_.CreateInBoundsGEP(binding_ty_, bindings, bi, "b");
  Value* id = field(binding, 0, i64_ty_, "id");
  llvm::BasicBlock* dispatch = block("dispatch");
  llvm::BasicBlock* bad_tensor = block("bad_tensor");
  b_.CreateCondBr(b_.CreateICmpEQ(b_.CreateTrunc(b_.CreateLShr(id, 32), b_.getInt32Ty()), tag), dispatch, bad_tensor, unlikely_);
  b_.SetInsertPoint(bad_tensor);
  exit_failed(code(PlanError::bad_tensor), bi, i64(int64_t{-1}), i64(int64_t{-1}), i64(int64_t{-1}));

  b_.SetInsertPoint(dispatch);
  Value* low = b_.CreateTrunc(id, b_.getInt32Ty(), "low");
  Value* index = b_.CreateSub(b_.CreateZExt(low, i64_ty_), i64(int64_t{1}), "index");
  llvm::SwitchInst* sw = b_.CreateSwitch(low, bad_tensor, static_cast<unsigned>(num_tensors));
  llvm::BasicBlock* accept = block("accept");
  llvm::BasicBlock* not_bindable = nullptr;
  std::map<std::pair<int32_t, std::vector<int64_t>>, llvm::BasicBlock*> checks;  // by dtype and dims
  for (size_t t = 0; t < num_tensors; ++t) {
    llvm::ConstantInt* case_value = b_.getInt32(static_cast<uint32_t>(t + 1));
    if (!t_.tensors[t].bindable) {
      if (!not_bindable) {
        not_bindable = block("not_bindable");
        b_.SetInsertPoint(not_bindable);
        exit_failed(code(PlanError::not_bindable), bi, index, i64(int64_t{-1}), i64(int64_t{-1}));
      }
      sw->addCase(case_value, not_bindable);
      continue;
    }
    llvm::BasicBlock*& tensor = checks[{t_.tensors[t].dtype, t_.tensors[t].dims}];
    if (!tensor) {
      tensor = block("tensor");
      b_.SetInsertPoint(tensor);
      emit_tensor(t_.tensors[t], binding, bi, index, accept);
    }
    sw->addCase(case_value, tensor);
  }
  // Indexed at run time, so that the slot and shape stores are one block (and shape_of stays a stack array).
  b_.SetInsertPoint(accept);
  b_.CreateStore(field(binding, 1, i8p_ty_, "data"), b_.CreateInBoundsGEP(i8p_ty_, slots_, index));
  if (shape_of_)
    b_.CreateStore(field(binding, 4, i64p_ty_, "shape"),
                   b_.CreateInBoundsGEP(shape_of_->getAllocatedType(), shape_of_, {i64(int64_t{0}), index}));
  i->addIncoming(b_.CreateAdd(i, b_.getInt32(1)), accept);
  b_.CreateBr(header);

  b_.SetInsertPoint(after);
  emit_missing();
  emit_symbols();
}

// The generator trusts the tables' shape (make_launch_plan_tables builds them so); say so when they are not.
void check_tables(const LaunchPlanTables& tables) {
  for (size_t t = 0; t < tables.tensors.size(); ++t)
    for (int64_t d : tables.tensors[t].dims)
      if (d == 0 || (d < 0 && -1 - d >= static_cast<int64_t>(tables.symbols.size())))
        fail(Status::internal, "host JIT: launch plan tensor " + std::to_string(t) + " has dim " + std::to_string(d) +
                                   ", neither a size nor one of the " + std::to_string(tables.symbols.size()) + " symbols");
}

std::unique_ptr<llvm::Module> plan_module(const LaunchPlanTables& tables, llvm::LLVMContext& ctx, const llvm::orc::LLJIT& jit) {
  auto module = std::make_unique<llvm::Module>("weft_launch_plan", ctx);
  module->setDataLayout(jit.getDataLayout());
  module->setTargetTriple(jit.getTargetTriple().str());
  PlanCodegen(tables, *module).emit();
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*module, &os)) fail(Status::internal, "host JIT: generated IR is invalid: " + os.str());
  return module;
}

// ---- ORC -----------------------------------------------------------------------------------------------

// One LLJIT per plan: destroying the plan frees its code. The compiler reports each object to `objects`.
std::unique_ptr<llvm::orc::LLJIT> make_jit(llvm::ObjectCache* objects) {
  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(*host_target().jtmb);
  builder.setCompileFunctionCreator([objects](llvm::orc::JITTargetMachineBuilder jtmb)
                                        -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
    llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = jtmb.createTargetMachine();
    if (!tm) return tm.takeError();
    return std::make_unique<llvm::orc::TMOwningSimpleCompiler>(std::move(*tm), objects);
  });
  std::unique_ptr<llvm::orc::LLJIT> jit = take(builder.create(), "creating the JIT");
  // Failures also come back from lookup(); this only keeps ORC from printing them to stderr itself.
  jit->getExecutionSession().setErrorReporter(
      [](llvm::Error err) { log_debug("host JIT: " + llvm::toString(std::move(err))); });
  // The code may call memset (clearing the slots); nothing else from the process.
  auto generator = take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                            jit->getDataLayout().getGlobalPrefix(),
                            [names = std::array{jit->mangleAndIntern("memset"), jit->mangleAndIntern("memcpy")}](
                                const llvm::orc::SymbolStringPtr& name) {
                              return name == names[0] || name == names[1];
                            }),
                        "resolving memset");
  jit->getMainJITDylib().addGenerator(std::move(generator));
  return jit;
}

class JitPlan final : public LaunchPlanJit {
 public:
  JitPlan(std::unique_ptr<JitObjectCache> objects, std::unique_ptr<llvm::orc::LLJIT> jit, uint32_t tag, HostJitStats stats)
      : objects_(std::move(objects)), jit_(std::move(jit)), stats_(std::move(stats)) {
    const llvm::JITEvaluatedSymbol fn = take(jit_->lookup(kPlanFunction), "compiling the launch plan");
    const llvm::JITEvaluatedSymbol tag_global = take(jit_->lookup(kTagGlobal), "looking up the plan's tag");
    *llvm::jitTargetAddressToPointer<uint32_t*>(tag_global.getAddress()) = tag;
    fn_ = llvm::jitTargetAddressToFunction<LaunchPlanFn>(fn.getAddress());
  }
  LaunchPlanFn function() const override { return fn_; }
  const HostJitStats& stats() const override { return stats_; }
  HostJitStats& mutable_stats() { return stats_; }

 private:
  std::unique_ptr<JitObjectCache> objects_;  // outlives the JIT whose compiler points to it
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  HostJitStats stats_;
  LaunchPlanFn fn_ = nullptr;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::unique_ptr<LaunchPlanJit> compile_launch_plan(const LaunchPlanTables& tables, cache::KernelCache* cache,
                                                   std::string* /*why*/) {
  const auto start = std::chrono::steady_clock::now();
  check_tables(tables);
  const HostTarget& host = host_target();
  const cache::CacheKey key = plan_cache_key(tables, host.arch);
  HostJitStats stats;
  if (cache) stats.cache_key = key.hex();

  // Warm: the cached object straight into the linker, no IR. A bad one is compiled afresh, never trusted.
  if (cache)
    if (std::unique_ptr<llvm::MemoryBuffer> object = JitObjectCache::load(*cache, key)) {
      try {
        stats.object_cache_hit = true;
        stats.object_bytes = object->getBufferSize();
        std::unique_ptr<llvm::orc::LLJIT> jit = make_jit(nullptr);
        check(jit->addObjectFile(std::move(object)), "adding the cached object");
        auto plan = std::make_unique<JitPlan>(nullptr, std::move(jit), tables.tag, stats);
        plan->mutable_stats().jit_ms = ms_since(start);
        return plan;
      } catch (const Error& e) {
        log_warning(std::string("host JIT: the cached launch plan ") + stats.cache_key + " did not load (" + e.what() +
                    "); compiling it again");
        stats.object_cache_hit = false;
      }
    }

  auto objects = std::make_unique<JitObjectCache>(cache, key);
  std::unique_ptr<llvm::orc::LLJIT> jit = make_jit(objects.get());
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = plan_module(tables, *ctx, *jit);
  check(jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))), "adding the plan's IR");
  JitObjectCache* captured = objects.get();
  auto plan = std::make_unique<JitPlan>(std::move(objects), std::move(jit), tables.tag, stats);
  plan->mutable_stats().object_bytes = captured->object_bytes();
  plan->mutable_stats().jit_ms = ms_since(start);
  return plan;
}

bool host_jit_available() { return true; }

}  // namespace weft
