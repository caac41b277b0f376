#include "pipeline/compile_graph.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/kernel_source.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "device/config.cuh"
#include "graph/serialize.hpp"
#include "lower/tagged_handoffs.hpp"
#include "lower/task_graph.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulator.hpp"

namespace weft {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// A cached entry back into a result; nullopt (with a warning) when its metadata or tables do not parse.
bool load_entry(const cache::Entry& e, CompileResult& r) {
  try {
    const auto meta = nlohmann::json::parse(e.metadata);
    r.tables = parse_task_tables(std::string(e.extra.begin(), e.extra.end()));
    r.num_tasks = meta.at("tasks").get<int64_t>();
    r.num_events = meta.at("events").get<int64_t>();
    r.arena_bytes = meta.at("arena_bytes").get<int64_t>();
    r.num_queues = meta.at("queues").get<int64_t>();
    r.arena_offsets = meta.at("arena_offsets").get<std::vector<int64_t>>();
    r.tensor_cores = meta.at("tensor_cores").get<bool>();
    r.device_library = meta.at("device_library").get<std::string>();
    r.tagged_tensors = meta.at("tagged_tensors").get<int64_t>();
    r.smem_bytes = meta.at("smem_bytes").get<int32_t>();
    r.kernel_name = meta.at("kernel_name").get<std::string>();
    r.launch_threads = meta.at("launch_threads").get<int32_t>();
    if (r.num_tasks != static_cast<int64_t>(r.tables.tasks.size()) || r.num_queues != r.tables.num_queues())
      fail(Status::cache, "metadata and task tables disagree");
  } catch (const std::exception& ex) {
    log_warning(std::string("kernel cache entry ignored: ") + ex.what());
    return false;
  }
  r.cubin = e.cubin;
  r.metadata = e.metadata;
  return true;
}

// With $WEFT_DUMP_DIR set: <key>_tasks.json, the task graph as compiled (tasks with their tiles, waits and
// notifies, events, queues), for debugging a schedule next to the kernel source and logs. Best effort.
void dump_task_graph(const Graph& g, const TaskGraph& tg, const Schedule& s, const std::string& key) {
  const char* dir = std::getenv("WEFT_DUMP_DIR");
  if (!dir || !*dir) return;
  nlohmann::json j;
  j["graph"] = g.name();
  j["tasks"] = nlohmann::json::array();
  for (size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    nlohmann::json waits = nlohmann::json::array();
    for (const TaskWait& w : t.waits) waits.push_back({w.event, w.count, w.tagged});
    j["tasks"].push_back({{"name", tg.task_name(g, static_cast<int32_t>(i))},
                          {"tile", {t.tile.row0, t.tile.row1, t.tile.col0, t.tile.col1}},
                          {"waits", waits},
                          {"waits_in_op", t.waits_in_op},
                          {"notifies", t.notifies},
                          {"bytes", t.bytes}});
  }
  j["events"] = nlohmann::json::array();
  for (size_t e = 0; e < tg.events.size(); ++e) j["events"].push_back(tg.event_name(g, static_cast<int32_t>(e)));
  j["queues"] = s.queues;
  const std::string path = std::string(dir) + "/" + key.substr(0, 12) + "_tasks.json";
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) log_warning("WEFT_DUMP_DIR: could not write " + path);
}

}  // namespace

int32_t arch_sm(const std::string& arch) {
  if (arch == "sm_80") return 80;
  if (arch == "sm_90a") return 90;
  if (arch == "sm_100a") return 100;
  invalid("target arch '" + arch + "' is not supported; expected sm_80, sm_90a or sm_100a");
}

int32_t default_sm_count(const std::string& arch) {
  if (arch == "sm_80") return 108;   // A100
  if (arch == "sm_90a") return 132;  // H100 SXM, H200
  if (arch == "sm_100a") return 148; // B200
  invalid("target arch '" + arch + "' is not supported; expected sm_80, sm_90a or sm_100a");
}

std::string specialization_text(const SymbolValues& values) {
  // Positional like the graph hash (names do not matter); the ranges are already in the graph hash.
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return "exact:" + s;
}

SymbolValues resolve_symbols(const Graph& g, const SymbolValues& given) {
  const auto& syms = g.symbols().all();
  if (given.empty()) {
    SymbolValues v;
    for (const Symbol& s : syms) v.push_back(s.max);
    return v;
  }
  if (given.size() != syms.size())
    invalid("the specialization gives " + std::to_string(given.size()) + " symbol values; graph '" + g.name() + "' has " +
            std::to_string(syms.size()) + " symbols");
  for (size_t i = 0; i < syms.size(); ++i)
    if (given[i] < syms[i].min || given[i] > syms[i].max)
      invalid("symbol '" + syms[i].name + "' is specialized to " + std::to_string(given[i]) + "; expected a value in [" +
              std::to_string(syms[i].min) + ", " + std::to_string(syms[i].max) + "]");
  return given;
}

// $name as a count from 1 to `most` (a power of two where `power_of_two`), or `unset` where the variable is unset or
// empty. Status::invalid_argument "<name>='<value>': expected ..." for anything else.
static int32_t env_count(const char* name, int32_t unset, int32_t most, bool power_of_two) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return unset;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 1 || v > most || (power_of_two && (v & (v - 1)) != 0))
    fail(Status::invalid_argument, std::string(name) + "='" + env + "': expected " +
                                       (power_of_two ? "a power of two" : "a whole number") + " from 1 to " +
                                       std::to_string(most));
  return static_cast<int32_t>(v);
}

int32_t attention_split_limit() {
  return env_count("WEFT_ATTENTION_SPLIT", WEFT_ATTN_MAX_SPLIT, WEFT_ATTN_MAX_SPLIT, false);
}

// $WEFT_SPLIT_K_PARTS=P: plain tensor-core linears split K into at least P parts (LowerOptions::split_k_parts), for
// measuring where staging less of x per task pays for the partial sums' round trip. Unset: 1 (only where x rows fit
// no tile whole).
int32_t split_k_parts_floor() { return env_count("WEFT_SPLIT_K_PARTS", 1, WEFT_MMA_MAX_SPLIT, true); }

int32_t attention_pairs_mode() {
  const char* env = std::getenv("WEFT_ATTENTION_PAIRS");
  if (env == nullptr || *env == '\0') return 0;
  const std::string v(env);
  if (v != "0" && v != "1") fail(Status::invalid_argument, "WEFT_ATTENTION_PAIRS='" + v + "': expected 0 or 1");
  return v == "1" ? 1 : -1;
}

// $WEFT_RESERVED_SMS=N: a producer's grid leaves at most N SMs free for its long-set-up consumers' tiles (lower.cpp,
// reserved_sms), for measuring how many of a batch's attention tiles should set up beside their producer.
constexpr int32_t kMaxReservedSms = 1024;
int32_t reserve_cap_setting() {
  const char* env = std::getenv("WEFT_RESERVED_SMS");
  if (env == nullptr || *env == '\0') return -1;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 0 || v > kMaxReservedSms)
    fail(Status::invalid_argument, std::string("WEFT_RESERVED_SMS='") + env + "': expected a whole number from 0 to " +
                                       std::to_string(kMaxReservedSms));
  return static_cast<int32_t>(v);
}

// $WEFT_WEIGHT_LOADER=1: kernels that may take the weight loader's library (weight_loader_applies) link it. Off by
// default while it is measured against the per-warp streams (docs/perf.md round 42).
bool weight_loader_requested() {
  const char* env = std::getenv("WEFT_WEIGHT_LOADER");
  if (env == nullptr || *env == '\0' || std::string(env) == "0") return false;
  if (std::string(env) != "1") fail(Status::invalid_argument, "WEFT_WEIGHT_LOADER='" + std::string(env) + "': expected 0 or 1");
  return true;
}

CompileResult compile_graph(const Graph& g, const CompileRequest& request, cache::KernelCache* cache) {
  const auto start = std::chrono::steady_clock::now();
  g.validate();
  const SymbolValues values = resolve_symbols(g, request.symbols);
  const int32_t sms = request.num_sms > 0 ? request.num_sms : default_sm_count(request.arch);
  CompileOptions copts;
  copts.arch = request.arch;
  // Everything that changes the code or the tables is in the key (the device library variant and the shared
  // memory below are decided by lowering, a function of what the key holds).
  const int32_t sm = arch_sm(request.arch);
  if (request.attention_split < 0 || request.attention_split > WEFT_ATTN_MAX_SPLIT)
    fail(Status::invalid_argument, "attention_split " + std::to_string(request.attention_split) +
                                       ": expected 0 (the default) or a whole number from 1 to " + std::to_string(WEFT_ATTN_MAX_SPLIT));
  const int32_t attention_split = request.attention_split > 0 ? request.attention_split : attention_split_limit();
  const int32_t split_k_parts = split_k_parts_floor();
  if (request.attention_pairs < -1 || request.attention_pairs > 1)
    fail(Status::invalid_argument, "attention_pairs " + std::to_string(request.attention_pairs) + ": expected -1, 0 or 1");
  const int32_t attention_pairs = request.attention_pairs != 0 ? request.attention_pairs : attention_pairs_mode();
  const int32_t reserve_cap = reserve_cap_setting();
  const bool want_loader = weight_loader_requested();
  const bool want_tagged = tagged_handoffs_requested();
  const std::string options_text = "queues=" + std::to_string(sms) + ";block=" + std::to_string(WEFT_BLOCK_THREADS) +
                                   ";smem=" + std::to_string(WEFT_SMEM_BYTES_BASE) + "/" +
                                   std::to_string(sm >= WEFT_SMEM_WIDE_MIN_SM ? WEFT_SMEM_BYTES_WIDE : 0) +
                                   ";lineinfo=" + (copts.line_info ? "1" : "0") +
                                   ";attn_split=" + std::to_string(attention_split) +
                                   ";split_k=" + std::to_string(split_k_parts) +
                                   ";attn_pairs=" + std::to_string(attention_pairs) +
                                   ";reserve=" + std::to_string(reserve_cap) +
                                   ";loader=" + (want_loader ? "1" : "0") +
                                   ";tagged=" + (want_tagged ? "1" : "0") +
                                   ";codegen=" + codegen_version();
  const cache::CacheKey key = cache::make_key(cache::KeyParts{graph_hash(g), specialization_text(values), request.arch,
                                                              options_text, kVersionString, nvrtc_version(),
                                                              nvjitlink_version(), device_library_version()});
  CompileResult r;
  r.key_hex = key.hex();
  if (cache) {
    if (auto e = cache->get(key); e && load_entry(*e, r)) {
      r.cache_hit = true;
      r.total_ms = ms_since(start);
      return r;
    }
  }

  bool wide = false;
  TaskGraph tg = lower_for_device(g, values, sms, sm, wide, attention_split, split_k_parts, attention_pairs,
                                 reserve_cap);
  bool loader = false;
  // The loader's kernel entry takes at most WEFT_LOADER_ENTRY_SLOTS tensors (config.cuh).
  if (want_loader && g.tensors().size() <= WEFT_LOADER_ENTRY_SLOTS && weight_loader_applies(tg, sm)) {
    TaskGraph lt = lower_for_weight_loader(g, values, sms, attention_split, reserve_cap);
    if ((loader = weight_loader_applies(lt, sm))) tg = std::move(lt);
  }
  // Tagged hand-offs need the library whose task loop runs the one-row bf16 tiles (neither tensor cores nor f16 ones
  // inlined), its base shared memory, and not the loader's.
  const bool tag_library =
      sm >= WEFT_TAGGED_MIN_SM && !loader && !wide && !may_use_tensor_core_tiles(tg) && !one_row_tiles_f16(tg);
  const TaggedHandoffs tagged = plan_tagged_handoffs(g, tg, want_tagged && tag_library);
  const MemoryPlan plan = plan_memory(g, tg, tagged.tensor);
  finalize_events(tg);
  const Schedule schedule = schedule_static(tg, sms);
  simulate(g, tg, schedule, plan, SimulationOptions{request.verify_seed, 2});
  dump_task_graph(g, tg, schedule, r.key_hex);
  drop_tagged_waits(tg);
  r.tables = build_task_tables(tg, schedule, static_cast<int32_t>(g.tensors().size()));
  r.num_tasks = static_cast<int64_t>(tg.tasks.size());
  r.num_events = static_cast<int64_t>(tg.events.size());
  r.arena_bytes = plan.arena_bytes;
  r.num_queues = sms;
  r.arena_offsets = plan.offset;
  r.lower_ms = ms_since(start);

  copts.tensor_cores = may_use_tensor_core_tiles(tg);
  copts.wide_smem = wide;
  copts.one_row_f16 = !copts.tensor_cores && one_row_tiles_f16(tg);
  copts.weight_loader = loader;
  copts.tagged = tagged.count > 0;
  r.tensor_cores = copts.tensor_cores;
  r.tagged_tensors = tagged.count;
  r.device_library = device_library_name(copts);
  r.smem_bytes = loader ? WEFT_SMEM_BYTES_LOADER : wide ? WEFT_SMEM_BYTES_WIDE : WEFT_SMEM_BYTES_BASE;
  const auto compile_start = std::chrono::steady_clock::now();
  // The weight loader's library holds its own kernel entry (device/loader_entry.cuh): nothing to generate, the library
  // linked alone.
  const CompiledKernel kernel = loader ? library_kernel(copts)
                                       : compile_kernel(generate_megakernel_source(static_cast<int32_t>(g.tensors().size())), copts);
  r.compile_ms = ms_since(compile_start);
  r.cubin.assign(kernel.cubin.begin(), kernel.cubin.end());
  r.kernel_name = loader ? WEFT_LOADER_KERNEL_NAME : kMegakernelName;
  r.launch_threads = loader ? WEFT_LOADER_LAUNCH_THREADS : WEFT_LAUNCH_THREADS;

  nlohmann::json meta = {{"kernel_name", r.kernel_name},
                         {"block_threads", WEFT_BLOCK_THREADS},
                         {"launch_threads", r.launch_threads},
                         {"smem_bytes", r.smem_bytes},
                         {"arch", request.arch},
                         {"queues", r.num_queues},
                         {"tasks", r.num_tasks},
                         {"events", r.num_events},
                         {"slots", g.tensors().size()},
                         {"arena_bytes", r.arena_bytes},
                         {"arena_offsets", r.arena_offsets},
                         {"estimated_us", schedule.estimated_us},
                         {"tensor_cores", r.tensor_cores},
                         {"tagged_tensors", r.tagged_tensors},
                         {"device_library", r.device_library},
                         {"graph", g.name()}};
  r.metadata = meta.dump();
  if (cache) {
    const std::string blob = serialize_task_tables(r.tables);
    cache->put(key, cache::Entry{r.cubin, r.metadata, std::vector<uint8_t>(blob.begin(), blob.end())});
  }
  r.total_ms = ms_since(start);
  return r;
}

}  // namespace weft
