// Compile-time benchmark (CPU only): a 16-layer Llama-3.2-1B-shaped decode graph for sm_90a.
//   cold  — empty cache: lower, schedule, verify, NVRTC + nvJitLink, store (median of several fresh caches)
//   warm  — a new process from exec to the cubin and task tables in memory, served by the cache
// Prints a table. Usage: weft_compile_bench [--layers N] [--batch B] [--repeats R]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "models/decoder_graph.hpp"
#include "pipeline/compile_graph.hpp"

using namespace weft;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

CompileResult compile_once(int64_t layers, int64_t batch, const std::filesystem::path& dir) {
  DecoderShape s = llama_3_2_1b_shape();
  s.layers = layers;
  const Graph g = build_decoder_graph(s);
  cache::Options o;
  o.dir = dir;
  cache::KernelCache c(o);
  CompileRequest req;
  req.arch = "sm_90a";
  req.symbols = SymbolValues{batch};
  return compile_graph(g, req, &c);
}

}  // namespace

int main(int argc, char** argv) {
  const auto process_start = std::chrono::steady_clock::now();
  int64_t layers = 16, batch = 1;
  int repeats = 3;
  std::string warm_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--layers") layers = std::atoll(argv[i + 1]);
    else if (a == "--batch") batch = std::atoll(argv[i + 1]);
    else if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
    else if (a == "--warm-child") warm_dir = argv[i + 1];
  }
  if (!warm_dir.empty()) {  // the child: from process start to the cubin in memory
    const CompileResult r = compile_once(layers, batch, warm_dir);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - process_start).count();
    std::printf("%.3f %d %zu\n", ms, r.cache_hit ? 1 : 0, r.cubin.size());
    return r.cache_hit ? 0 : 2;
  }

  std::vector<double> cold, lower, nvrtc;
  CompileResult last;
  const auto base = std::filesystem::temp_directory_path() / ("weft-bench-" + std::to_string(getpid()));
  for (int i = 0; i < repeats; ++i) {
    const auto dir = base / ("cold" + std::to_string(i));
    last = compile_once(layers, batch, dir);
    cold.push_back(last.total_ms);
    lower.push_back(last.lower_ms);
    nvrtc.push_back(last.compile_ms);
  }
  // Warm: new processes (fork + exec of this binary) against the last filled cache.
  std::vector<double> warm;
  const std::string dir = (base / ("cold" + std::to_string(repeats - 1))).string();
  for (int i = 0; i < repeats + 2; ++i) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(pipefd[1], 1);
      const std::string l = std::to_string(layers), b = std::to_string(batch);
      execl("/proc/self/exe", argv[0], "--layers", l.c_str(), "--batch", b.c_str(), "--warm-child", dir.c_str(), nullptr);
      _exit(127);
    }
    close(pipefd[1]);
    char buf[128] = {};
    const ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "warm child failed (status %d)\n", status);
      return 1;
    }
    warm.push_back(std::atof(buf));
  }
  std::filesystem::remove_all(base);

  std::printf("weft compile benchmark: %lld-layer Llama-3.2-1B-shaped decode graph, batch %lld, sm_90a, %d repeats\n",
              static_cast<long long>(layers), static_cast<long long>(batch), repeats);
  std::printf("| measure | median | goal |\n|---|---|---|\n");
  std::printf("| cold compile (lower + schedule + verify + NVRTC + nvJitLink + store) | %.1f ms | <= 5000 ms |\n", median(cold));
  std::printf("|   of which lower + schedule + verify | %.1f ms | |\n", median(lower));
  std::printf("|   of which NVRTC + nvJitLink | %.1f ms | |\n", median(nvrtc));
  std::printf("| warm hit, new process to cubin in memory | %.1f ms | <= 20 ms |\n", median(warm));
  std::printf("| cubin size | %zu bytes | |\n", last.cubin.size());
  std::printf("| tasks / events / queues | %lld / %lld / %lld | |\n", static_cast<long long>(last.num_tasks),
              static_cast<long long>(last.num_events), static_cast<long long>(last.num_queues));
  return 0;
}
