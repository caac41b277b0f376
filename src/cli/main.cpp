// The `weft` command: compile and inspect graphs from their canonical JSON, and manage the kernel cache.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "core/error.hpp"
#include "graph/serialize.hpp"
#include "lower/task_graph.hpp"
#include "models/decoder_graph.hpp"
#include "models/model_weights.hpp"
#include "pipeline/compile_graph.hpp"
#include "runtime/device_context.hpp"
#include "runtime/driver.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"

using namespace weft;

namespace {

const char* kUsage =
    "usage:\n"
    "  weft compile GRAPH.json [--arch sm_80|sm_90a|sm_100a] [--sms N] [--set SYMBOL=VALUE]... [--no-cache]\n"
    "  weft inspect GRAPH.json [--arch ARCH] [--sms N] [--set SYMBOL=VALUE]...\n"
    "  weft cache stats|list|verify|clear\n"
    "  weft example llama-3.2-1b|qwen3-0.6b|qwen3-8b [--layers N]   (prints a decode graph's canonical JSON)\n"
    "  weft devices   (lists the GPUs weft can use; exit status 1 when there is none)\n"
    "  weft checkpoint tiny-llama|tiny-qwen3|llama-3.2-1b|qwen3-0.6b|qwen3-8b DIR [--layers N] [--seed S]\n"
    "      (writes a Hugging Face folder with random weights: config.json + model.safetensors)\n"
    "The cache lives in $WEFT_CACHE_DIR (default $XDG_CACHE_HOME/weft); WEFT_CACHE=off disables it.\n";

struct Args {
  std::string command, sub, file, arch = "sm_90a";
  int32_t sms = 0;
  std::map<std::string, int64_t> set;
  bool no_cache = false;
  int64_t layers = 0;
  uint32_t seed = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) invalid("option " + s + " needs a value");
      return argv[++i];
    };
    if (s == "--arch") a.arch = value();
    else if (s == "--sms") a.sms = static_cast<int32_t>(std::stol(value()));
    else if (s == "--no-cache") a.no_cache = true;
    else if (s == "--layers") a.layers = std::stoll(value());
    else if (s == "--seed") a.seed = static_cast<uint32_t>(std::stoul(value()));
    else if (s == "--set") {
      const std::string kv = value();
      const auto eq = kv.find('=');
      if (eq == std::string::npos) invalid("--set takes SYMBOL=VALUE, got '" + kv + "'");
      a.set[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
    } else if (s == "-h" || s == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!s.empty() && s[0] == '-') {
      invalid("unknown option '" + s + "'");
    } else {
      pos.push_back(s);
    }
  }
  if (pos.empty()) invalid("no command given");
  a.command = pos[0];
  if (a.command == "devices") {
    if (pos.size() != 1) invalid("'weft devices' takes no argument");
  } else if (a.command == "checkpoint") {
    if (pos.size() != 3) invalid("'weft checkpoint' takes a shape and a folder");
    a.sub = pos[1];
    a.file = pos[2];
  } else if (a.command == "cache" || a.command == "example") {
    if (pos.size() != 2) invalid("'weft " + a.command + "' takes one argument");
    a.sub = pos[1];
  } else {
    if (pos.size() != 2) invalid("'weft " + a.command + "' takes one GRAPH.json");
    a.file = pos[1];
  }
  return a;
}

Graph load_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::io, "cannot read '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return graph_from_json(ss.str());
  } catch (const Error& e) {
    fail(e.status(), path + ": " + e.what());
  }
}

SymbolValues symbol_values(const Graph& g, const std::map<std::string, int64_t>& set) {
  SymbolValues v;
  for (const Symbol& s : g.symbols().all()) v.push_back(s.max);
  for (const auto& [name, value] : set) {
    const int32_t id = g.symbols().find(name);
    if (id < 0) invalid("--set names symbol '" + name + "', which graph '" + g.name() + "' does not declare");
    v[static_cast<size_t>(id)] = value;
  }
  return v;
}

int cmd_compile(const Args& a) {
  const Graph g = load_graph(a.file);
  std::unique_ptr<cache::KernelCache> cache = a.no_cache ? nullptr : cache::open_kernel_cache();
  CompileRequest req;
  req.arch = a.arch;
  req.num_sms = a.sms;
  req.symbols = symbol_values(g, a.set);
  const CompileResult r = compile_graph(g, req, cache.get());
  std::printf("graph      %s (%zu ops)\n", g.name().c_str(), g.nodes().size());
  std::printf("target     %s, %lld queues\n", a.arch.c_str(), static_cast<long long>(r.num_queues));
  std::printf("tasks      %lld\n", static_cast<long long>(r.num_tasks));
  std::printf("events     %lld\n", static_cast<long long>(r.num_events));
  std::printf("arena      %lld bytes\n", static_cast<long long>(r.arena_bytes));
  std::printf("cubin      %zu bytes\n", r.cubin.size());
  std::printf("smem       %d bytes per block (device library %s)\n", r.smem_bytes, r.device_library.c_str());
  std::printf("tagged     %lld tensors handed over as tagged words\n", static_cast<long long>(r.tagged_tensors));
  std::printf("cache      %s (key %s)\n", cache ? (r.cache_hit ? "hit" : "miss") : "off", r.key_hex.c_str());
  std::printf("time       %.1f ms (lower+schedule+verify %.1f ms, NVRTC+nvJitLink %.1f ms)\n", r.total_ms, r.lower_ms, r.compile_ms);
  return 0;
}

int cmd_inspect(const Args& a) {
  const Graph g = load_graph(a.file);
  std::fputs(graph_to_text(g).c_str(), stdout);
  const int32_t sms = a.sms > 0 ? a.sms : default_sm_count(a.arch);
  bool wide = false;
  TaskGraph tg = lower_for_device(g, symbol_values(g, a.set), sms, arch_sm(a.arch), wide, attention_split_limit(),
                                  split_k_parts_floor(), attention_pairs_mode(), reserve_cap_setting());
  const MemoryPlan plan = plan_memory(g, tg);
  finalize_events(tg);
  const Schedule s = schedule_static(tg, sms);
  std::printf("\ntask graph for %s (%d queues, %d bytes of shared memory): %zu tasks, %zu events, arena %lld bytes, "
              "estimated %.1f us\n",
              a.arch.c_str(), sms, wide ? WEFT_SMEM_BYTES_WIDE : WEFT_SMEM_BYTES_BASE, tg.tasks.size(), tg.events.size(),
              static_cast<long long>(plan.arena_bytes), s.estimated_us);
  std::printf("  %-24s %-18s %10s %8s %10s %10s\n", "op", "output", "grid", "tasks", "waits/task", "bytes/task");
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const TileGrid& grid = tg.grids[n];
    size_t waits = 0;
    double bytes = 0;
    for (const Task& t : tg.tasks)
      if (t.node == static_cast<int32_t>(n)) {
        waits += t.waits.size();
        bytes += t.bytes;
      }
    const auto count = static_cast<double>(grid.tasks());
    std::string grid_str = std::to_string(grid.row_blocks()) + "x" + std::to_string(grid.col_tiles());
    // A tile split into P parts (a linear over K, an argmax over its row's columns): "RxCxPp".
    if (grid.k_parts > 1) grid_str += "x" + std::to_string(grid.k_parts) + "p";
    std::printf("  %-24s %-18s %10s %8lld %10.1f %10.0f\n", std::string(g.nodes()[n].op->name).c_str(),
                g.tensor(g.nodes()[n].output).name.c_str(), grid_str.c_str(), static_cast<long long>(grid.tasks()),
                static_cast<double>(waits) / count, bytes / count);
  }
  return 0;
}

// The published models' shapes `weft example` and `weft checkpoint` know by name; false for any other name.
bool published_shape(const std::string& name, DecoderShape& s) {
  if (name == "llama-3.2-1b") s = llama_3_2_1b_shape();
  else if (name == "qwen3-0.6b") s = qwen3_0_6b_shape();
  else if (name == "qwen3-8b") s = qwen3_8b_shape();
  else return false;
  return true;
}

int cmd_example(const Args& a) {
  DecoderShape s;
  if (!published_shape(a.sub, s)) invalid("unknown example '" + a.sub + "'; expected llama-3.2-1b, qwen3-0.6b or qwen3-8b");
  if (a.layers > 0) s.layers = a.layers;
  std::fputs(graph_to_json_string(build_decoder_graph(s)).c_str(), stdout);
  return 0;
}

int cmd_checkpoint(const Args& a) {
  DecoderShape s;
  if (a.sub == "tiny-llama") s = tiny_decoder_shape(false);
  else if (a.sub == "tiny-qwen3") s = tiny_decoder_shape(true);
  else if (!published_shape(a.sub, s))
    invalid("unknown checkpoint shape '" + a.sub + "'; expected tiny-llama, tiny-qwen3, llama-3.2-1b, qwen3-0.6b or qwen3-8b");
  if (a.layers > 0) s.layers = a.layers;
  write_random_checkpoint(a.file, s, a.seed);
  std::printf("wrote %s: random %s-shaped checkpoint (%lld layers, hidden %lld, vocab %lld)\n", a.file.c_str(), a.sub.c_str(),
              static_cast<long long>(s.layers), static_cast<long long>(s.hidden), static_cast<long long>(s.vocab));
  return 0;
}

int cmd_devices() {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("no GPU: %s\n", why.c_str());
    return 1;
  }
  int n = 0;
  check_cu(driver().device_get_count(&n), "cuDeviceGetCount");
  for (int i = 0; i < n; ++i) {
    const auto d = DeviceContext::open(i);
    std::printf("%d: %s (%s, %d SMs)\n", i, d->name().c_str(), d->arch().c_str(), d->sm_count());
  }
  return 0;
}

int cmd_cache(const Args& a) {
  auto cache = cache::open_kernel_cache();
  if (!cache) {
    std::printf("the kernel cache is off (WEFT_CACHE=off)\n");
    return 0;
  }
  if (a.sub == "stats") {
    const auto s = cache->stats();
    std::printf("path     %s\nentries  %llu\nbytes    %llu of %llu\nhits     %llu\n", s.path.c_str(),
                static_cast<unsigned long long>(s.entries), static_cast<unsigned long long>(s.total_bytes),
                static_cast<unsigned long long>(s.max_bytes), static_cast<unsigned long long>(s.hits));
  } else if (a.sub == "list") {
    std::printf("%-32s %10s %6s %s\n", "key", "bytes", "hits", "kernel");
    for (const auto& e : cache->list())
      std::printf("%-32s %10llu %6llu %s\n", e.key.c_str(), static_cast<unsigned long long>(e.size),
                  static_cast<unsigned long long>(e.hits), e.kernel_name.c_str());
  } else if (a.sub == "verify") {
    const auto r = cache->verify();
    std::printf("%llu entries ok, %llu removed%s\n", static_cast<unsigned long long>(r.ok),
                static_cast<unsigned long long>(r.removed), r.rebuilt ? ", database file rebuilt" : "");
  } else if (a.sub == "clear") {
    cache->clear();
    std::printf("cleared %s\n", cache->db_path().c_str());
  } else {
    invalid("unknown cache command '" + a.sub + "'; expected stats, list, verify or clear");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse_args(argc, argv);
    if (a.command == "compile") return cmd_compile(a);
    if (a.command == "inspect") return cmd_inspect(a);
    if (a.command == "cache") return cmd_cache(a);
    if (a.command == "example") return cmd_example(a);
    if (a.command == "checkpoint") return cmd_checkpoint(a);
    if (a.command == "devices") return cmd_devices();
    invalid("unknown command '" + a.command + "'");
  } catch (const Error& e) {
    std::fprintf(stderr, "weft: error: %s\n", e.what());
    if (e.status() == Status::invalid_argument && std::strstr(e.what(), "graph JSON") == nullptr) std::fputs(kUsage, stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: error: %s\n", e.what());
    return 1;
  }
}
