// The launch plan as machine code. The IR is the reference interpreter (runtime/launch_plan.cpp) with the
// tables folded in: a loop over the bindings whose `switch` on the tensor index jumps to that tensor's
// straight-line checks (dtype, rank, dims and symbol ranges as constants), then the missing-tensor checks,
// the symbol agreement and the bucket choice unrolled in the reference's order. Every failure edge goes to
// one block that writes error_info from phis. ORC's LLJIT compiles it (codegen at -O2, no IR passes: the IR
// is emitted already simple, and the passes would cost more time than they save).
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

#include <array>
#include <chrono>
#include <cstddef>
#include <mutex>

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

class PlanCodegen {
 public:
  PlanCodegen(const LaunchPlanTables& tables, llvm::Module& module)
      : t_(tables), m_(module), ctx_(module.getContext()), b_(ctx_) {}

  void emit();

 private:
  llvm::ConstantInt* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::Value* field(llvm::Value* binding, unsigned index, llvm::Type* type, const char* name) {
    return b_.CreateLoad(type, b_.CreateStructGEP(binding_ty_, binding, index), name);
  }
  llvm::BasicBlock* block(const char* name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }
  // An edge from the current block to the failure block with these error_info words.
  void add_failure(PlanError e, llvm::Value* binding, llvm::Value* tensor, int64_t dim, int64_t symbol);
  // Branches to the failure block when `cond` holds, and continues in a new block otherwise.
  void fail_if(llvm::Value* cond, PlanError e, llvm::Value* binding, int64_t tensor, int64_t dim, int64_t symbol);
  void emit_tensor(size_t t, llvm::Value* binding, llvm::Value* binding_index, llvm::BasicBlock* accept);
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
  llvm::Value *slots_ = nullptr, *symbols_ = nullptr, *compile_values_ = nullptr;
  llvm::AllocaInst* shape_of_ = nullptr;  // [num tensors x i64*]: the shape each tensor was bound with
  llvm::BasicBlock* fail_ = nullptr;
  llvm::PHINode* fail_phi_[5] = {};  // code, then error_info's four words
  llvm::MDNode* unlikely_ = nullptr;
};

void PlanCodegen::add_failure(PlanError e, llvm::Value* binding, llvm::Value* tensor, int64_t dim, int64_t symbol) {
  llvm::BasicBlock* from = b_.GetInsertBlock();
  fail_phi_[0]->addIncoming(b_.getInt32(static_cast<uint32_t>(e)), from);
  fail_phi_[1]->addIncoming(binding, from);
  fail_phi_[2]->addIncoming(tensor, from);
  fail_phi_[3]->addIncoming(i64(dim), from);
  fail_phi_[4]->addIncoming(i64(symbol), from);
}

void PlanCodegen::fail_if(llvm::Value* cond, PlanError e, llvm::Value* binding, int64_t tensor, int64_t dim,
                          int64_t symbol) {
  llvm::BasicBlock* next = block("ok");
  b_.CreateCondBr(cond, fail_, next, unlikely_);
  add_failure(e, binding, i64(tensor), dim, symbol);
  b_.SetInsertPoint(next);
}

// One bindable tensor's checks, in the reference's order; falls through to `accept`.
void PlanCodegen::emit_tensor(size_t t, llvm::Value* binding, llvm::Value* bi, llvm::BasicBlock* accept) {
  const LaunchPlanTables::Tensor& x = t_.tensors[t];
  const auto ti = static_cast<int64_t>(t);
  llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(i8p_ty_, slots_, t);
  fail_if(b_.CreateIsNotNull(b_.CreateLoad(i8p_ty_, slot)), PlanError::bound_twice, bi, ti, -1, -1);
  llvm::Value* data = field(binding, 1, i8p_ty_, "data");
  fail_if(b_.CreateIsNull(data), PlanError::null_data, bi, ti, -1, -1);
  fail_if(b_.CreateICmpNE(field(binding, 2, b_.getInt32Ty(), "dtype"), b_.getInt32(static_cast<uint32_t>(x.dtype))),
          PlanError::dtype, bi, ti, -1, -1);
  const auto rank = static_cast<uint32_t>(x.dims.size());
  fail_if(b_.CreateICmpNE(field(binding, 3, b_.getInt32Ty(), "rank"), b_.getInt32(rank)), PlanError::rank, bi, ti, -1, -1);
  if (rank > 0) {
    llvm::Value* shape = field(binding, 4, i64p_ty_, "shape");
    std::vector<llvm::Value*> size(rank);  // each dim's size: a constant where fixed
    for (uint32_t d = 0; d < rank; ++d) {
      const int64_t want = x.dims[d];
      llvm::Value* got = b_.CreateLoad(i64_ty_, b_.CreateConstInBoundsGEP1_64(i64_ty_, shape, d));
      if (want > 0) {
        fail_if(b_.CreateICmpNE(got, i64(want)), PlanError::fixed_dim, bi, ti, d, -1);
        size[d] = i64(want);
      } else {
        const LaunchPlanTables::Symbol& s = t_.symbols.at(static_cast<size_t>(-1 - want));
        fail_if(b_.CreateOr(b_.CreateICmpSLT(got, i64(s.min)), b_.CreateICmpSGT(got, i64(s.max))),
                PlanError::symbol_range, bi, ti, d, -1 - want);
        size[d] = got;
      }
    }
    // Strides: none means dense; given ones must be exactly the dense ones.
    llvm::Value* strides = field(binding, 5, i64p_ty_, "strides");
    llvm::BasicBlock* check = block("strides");
    llvm::BasicBlock* done = block("dense");
    b_.CreateCondBr(b_.CreateIsNull(strides), done, check);
    b_.SetInsertPoint(check);
    llvm::Value* dense = i64(1);
    for (uint32_t d = rank; d-- > 0;) {
      llvm::Value* got = b_.CreateLoad(i64_ty_, b_.CreateConstInBoundsGEP1_64(i64_ty_, strides, d));
      fail_if(b_.CreateICmpNE(got, dense), PlanError::strides, bi, ti, d, -1);
      if (d > 0) dense = b_.CreateMul(dense, size[d]);  // wraps like the reference's int64 product
    }
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
  b_.CreateStore(data, slot);
  b_.CreateBr(accept);
}

// After the loop: every bindable tensor bound, each symbol one value (the reference's order), the buckets.
void PlanCodegen::emit_symbols() {
  llvm::Value* none = i64(-1);
  for (size_t t = 0; t < t_.tensors.size(); ++t)
    if (t_.tensors[t].bindable) {
      llvm::Value* slot = b_.CreateLoad(i8p_ty_, b_.CreateConstInBoundsGEP1_64(i8p_ty_, slots_, t));
      fail_if(b_.CreateIsNull(slot), PlanError::missing, none, static_cast<int64_t>(t), -1, -1);
    }
  // value[s]: the symbol's value so far; nullptr while no tensor has set it (statically 0).
  std::vector<llvm::Value*> value(t_.symbols.size(), nullptr);
  auto store_symbols = [&] {
    for (size_t s = 0; s < value.size(); ++s)
      if (value[s]) b_.CreateStore(value[s], b_.CreateConstInBoundsGEP1_64(i64_ty_, symbols_, s));
  };
  for (int pass = 0; pass < 2; ++pass)
    for (size_t t = 0; t < t_.tensors.size(); ++t) {
      const LaunchPlanTables::Tensor& x = t_.tensors[t];
      if (!x.bindable || x.is_output != (pass == 1)) continue;
      llvm::Value* shape = nullptr;
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (x.dims[d] > 0) continue;
        const auto s = static_cast<size_t>(-1 - x.dims[d]);
        if (!shape) shape = b_.CreateLoad(i64p_ty_, b_.CreateConstInBoundsGEP2_64(shape_of_->getAllocatedType(), shape_of_, 0, t));
        llvm::Value* got = b_.CreateLoad(i64_ty_, b_.CreateConstInBoundsGEP1_64(i64_ty_, shape, d));
        if (!value[s]) {
          value[s] = got;
          continue;
        }
        // A symbol still 0 takes this value (as the reference's "symbols[s] == 0"); else they must agree.
        llvm::Value* unset = b_.CreateICmpEQ(value[s], i64(0));
        llvm::Value* differs = b_.CreateAnd(b_.CreateNot(unset), b_.CreateICmpNE(value[s], got));
        llvm::BasicBlock* mismatch = block("mismatch");
        llvm::BasicBlock* next = block("agree");
        b_.CreateCondBr(differs, mismatch, next, unlikely_);
        b_.SetInsertPoint(mismatch);
        store_symbols();  // the values found before the mismatch, as the reference leaves them
        add_failure(PlanError::symbol_mismatch, none, i64(static_cast<int64_t>(t)), static_cast<int64_t>(d),
                    static_cast<int64_t>(s));
        b_.CreateBr(fail_);
        b_.SetInsertPoint(next);
        value[s] = b_.CreateSelect(unset, got, value[s]);
      }
    }
  store_symbols();
  // The compile value: the first bucket >= the value (in list order), else the value; 0 stays 0.
  for (size_t s = 0; s < t_.symbols.size(); ++s) {
    llvm::Value* v = value[s] ? value[s] : i64(0);
    if (value[s] && !t_.symbols[s].buckets.empty()) {
      llvm::Value* chosen = v;
      const std::vector<int64_t>& buckets = t_.symbols[s].buckets;
      for (size_t k = buckets.size(); k-- > 0;) chosen = b_.CreateSelect(b_.CreateICmpSLE(v, i64(buckets[k])), i64(buckets[k]), chosen);
      v = b_.CreateSelect(b_.CreateICmpEQ(v, i64(0)), v, chosen);
    }
    b_.CreateStore(v, b_.CreateConstInBoundsGEP1_64(i64_ty_, compile_values_, s));
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
  llvm::Value* bindings = fn_->getArg(0);
  llvm::Value* num_bindings = fn_->getArg(1);
  slots_ = fn_->getArg(2);
  symbols_ = fn_->getArg(3);
  compile_values_ = fn_->getArg(4);
  llvm::Value* error_info = fn_->getArg(5);
  auto* tag_global = new llvm::GlobalVariable(m_, b_.getInt32Ty(), false, llvm::GlobalValue::ExternalLinkage,
                                              b_.getInt32(0), kTagGlobal);
  unlikely_ = llvm::MDBuilder(ctx_).createBranchWeights(1, 1u << 20);
  const size_t num_tensors = t_.tensors.size();

  llvm::BasicBlock* entry = block("entry");
  fail_ = block("fail");
  b_.SetInsertPoint(fail_);
  fail_phi_[0] = b_.CreatePHI(b_.getInt32Ty(), 0, "code");
  for (int w = 0; w < kPlanErrorInfoWords; ++w) fail_phi_[w + 1] = b_.CreatePHI(i64_ty_, 0);
  for (int w = 0; w < kPlanErrorInfoWords; ++w)
    b_.CreateStore(fail_phi_[w + 1], b_.CreateConstInBoundsGEP1_64(i64_ty_, error_info, static_cast<uint64_t>(w)));
  b_.CreateRet(fail_phi_[0]);

  b_.SetInsertPoint(entry);
  bool any_symbolic = false;
  for (const LaunchPlanTables::Tensor& x : t_.tensors)
    for (int64_t d : x.dims) any_symbolic = any_symbolic || (x.bindable && d <= 0);
  if (any_symbolic) shape_of_ = b_.CreateAlloca(llvm::ArrayType::get(i64p_ty_, num_tensors), nullptr, "shape_of");
  if (num_tensors > 0) b_.CreateMemSet(slots_, b_.getInt8(0), num_tensors * sizeof(void*), llvm::MaybeAlign(8));
  for (size_t s = 0; s < t_.symbols.size(); ++s) b_.CreateStore(i64(0), b_.CreateConstInBoundsGEP1_64(i64_ty_, symbols_, s));
  llvm::Value* tag = b_.CreateLoad(b_.getInt32Ty(), tag_global, "tag");
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
  llvm::Value* bi = b_.CreateSExt(i, i64_ty_, "bi");
  llvm::Value* binding = b_.CreateInBoundsGEP(binding_ty_, bindings, bi, "b");
  llvm::Value* id = field(binding, 0, i64_ty_, "id");
  llvm::BasicBlock* dispatch = block("dispatch");
  llvm::BasicBlock* bad = block("bad_tensor");
  b_.CreateCondBr(b_.CreateICmpEQ(b_.CreateTrunc(b_.CreateLShr(id, 32), b_.getInt32Ty()), tag), dispatch, bad, unlikely_);
  b_.SetInsertPoint(bad);
  add_failure(PlanError::bad_tensor, bi, i64(-1), -1, -1);
  b_.CreateBr(fail_);

  b_.SetInsertPoint(dispatch);
  llvm::Value* low = b_.CreateTrunc(id, b_.getInt32Ty(), "low");
  llvm::Value* index = b_.CreateSub(b_.CreateZExt(low, i64_ty_), i64(1), "index");
  llvm::SwitchInst* sw = b_.CreateSwitch(low, bad, static_cast<unsigned>(num_tensors));
  llvm::BasicBlock* accept = block("accept");
  llvm::BasicBlock* not_bindable = nullptr;
  for (size_t t = 0; t < num_tensors; ++t) {
    llvm::ConstantInt* case_value = b_.getInt32(static_cast<uint32_t>(t + 1));
    if (!t_.tensors[t].bindable) {
      if (!not_bindable) {
        not_bindable = block("not_bindable");
        b_.SetInsertPoint(not_bindable);
        add_failure(PlanError::not_bindable, bi, index, -1, -1);
        b_.CreateBr(fail_);
      }
      sw->addCase(case_value, not_bindable);
      continue;
    }
    llvm::BasicBlock* tensor = block("tensor");
    sw->addCase(case_value, tensor);
    b_.SetInsertPoint(tensor);
    emit_tensor(t, binding, bi, accept);
  }
  // Remembers the shape for the symbol agreement below (indexed at run time: stays one stack array).
  b_.SetInsertPoint(accept);
  if (shape_of_)
    b_.CreateStore(field(binding, 4, i64p_ty_, "shape"),
                   b_.CreateInBoundsGEP(shape_of_->getAllocatedType(), shape_of_, {i64(0), index}));
  llvm::Value* next = b_.CreateAdd(i, b_.getInt32(1));
  i->addIncoming(next, accept);
  b_.CreateBr(header);

  b_.SetInsertPoint(after);
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
