// NVRTC + nvJitLink against the embedded device library, for every supported architecture. No GPU needed:
// the result is checked as a linked ELF that holds the library's task loop and event primitives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "codegen/kernel_source.hpp"
#include "compile/embedded_device_library.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "core/error.hpp"
#include "device/task_abi.h"
#include "pipeline/compile_graph.hpp"
#include "test_models.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

const char* const kEventsKernel =
    "#include \"weft_device.h\"\n"
    "extern \"C\" __global__ void __launch_bounds__(WEFT_BLOCK_THREADS, WEFT_MIN_BLOCKS_PER_SM)\n"
    "events(unsigned int* counters, const weft_env* env, unsigned int epoch) {\n"
    "  if (!weft_event_wait(&counters[0], 1u * epoch, 1000000ll, env, 0)) return;\n"
    "  if (weft_dev_error_raised(env)) weft_dev_record_error(env, WEFT_DEV_ERR_DEADLOCK, 1u, 2u, 3u);\n"
    "  weft_event_notify(&counters[1]);\n"
    "}\n";

// A kernel cache in a fresh folder under /tmp, removed with it; `kc` is null when the folder could not be made.
struct TempKernelCache {
  explicit TempKernelCache(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir = tmpl;
    cache::Options o;
    o.dir = dir / "cache";
    kc = std::make_unique<cache::KernelCache>(o);
  }
  ~TempKernelCache() {
    kc.reset();
    if (!dir.empty()) fs::remove_all(dir);
  }
  fs::path dir;
  std::unique_ptr<cache::KernelCache> kc;
};

bool is_elf(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == '\x7f' && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

bool contains(const std::vector<char>& b, const std::string& s) {
  return std::search(b.begin(), b.end(), s.begin(), s.end()) != b.end();
}

// A field of the section header of section `name` of an ELF64 cubin (little endian): `field` bytes at `offset` in the
// header (0x18: where it lies in the file; 0x20: its size), or -1 when it has none.
int64_t elf_section_field(const std::vector<char>& b, const std::string& name, size_t offset, size_t field) {
  auto get = [&](size_t at, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && at + i < b.size(); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
    return v;
  };
  const uint64_t shoff = get(0x28, 8), entsize = get(0x3a, 2), count = get(0x3c, 2), strndx = get(0x3e, 2);
  if (entsize < 64 || shoff + count * entsize > b.size() || strndx >= count) return -1;
  const uint64_t strings = get(shoff + strndx * entsize + 0x18, 8);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = shoff + i * entsize, n = strings + get(at, 4);
    if (n + name.size() < b.size() && std::string(b.data() + n) == name) return static_cast<int64_t>(get(at + offset, field));
  }
  return -1;
}
int64_t elf_section_size(const std::vector<char>& b, const std::string& name) { return elf_section_field(b, name, 0x20, 8); }

// The most registers any function of a cubin uses (the EIATTR_REGCOUNT records of its .nv.info section: entries of
// a format byte, an attribute byte and a 16-bit value, or for format 4 its payload's size and then the payload,
// here the function's symbol and its registers), or -1 when it has none.
int64_t max_function_registers(const std::vector<char>& b) {
  const int64_t at = elf_section_field(b, ".nv.info", 0x18, 8), size = elf_section_size(b, ".nv.info");
  if (at < 0 || size < 0 || at + size > static_cast<int64_t>(b.size())) return -1;
  auto byte = [&](int64_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[static_cast<size_t>(at + i)])); };
  int64_t most = -1;
  for (int64_t i = 0; i + 4 <= size;) {
    const uint32_t format = byte(i), attribute = byte(i + 1), payload = byte(i + 2) | byte(i + 3) << 8;
    if (format == 4 && attribute == 0x2f && payload == 8 && i + 12 <= size)
      most = std::max<int64_t>(most, byte(i + 8) | byte(i + 9) << 8 | byte(i + 10) << 16 | byte(i + 11) << 24);
    i += 4 + (format == 4 ? payload : 0);
  }
  return most;
}

// Sets (or clears) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

class DeviceCompileArch : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceCompileArch, EventPrimitivesLink) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  const CompiledKernel k = compile_kernel(kEventsKernel, CompileOptions{GetParam(), true, {}});
  ASSERT_TRUE(is_elf(k.cubin));
  for (const char* f : {"weft_event_wait", "weft_event_notify", "weft_dev_record_error", "weft_dev_error_raised"})
    EXPECT_TRUE(contains(k.cubin, f)) << f;
}

// The real generator's megakernel: linked with the library's task loop (every op is inlined there), within the
// register cap of its launch bounds (or nvJitLink refuses to link), with each of the arch's libraries (with and
// without the tensor-core tiles, the latter for bf16 or f16 one-row tiles), which are different code.
TEST_P(DeviceCompileArch, GeneratedMegakernelLinksTheTaskLoop) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  std::vector<std::vector<char>> cubins;
  // The libraries: full, without tensor-core tiles (bf16, f16), and (sm_90 and later) full for the wide shared memory
  // and without tensor-core tiles with tagged hand-offs. (The weight loader's holds its own kernel entry and is linked
  // alone: WeightLoaderLibraryHasItsOwnKernel.)
  const bool has_wide = std::string(GetParam()) != "sm_80";
  for (int variant = 0; variant < (has_wide ? 5 : 3); ++variant) {
    const bool tensor_cores = variant == 0 || variant == 3;
    CompileOptions o{GetParam(), false, {}};
    o.tensor_cores = tensor_cores;
    o.one_row_f16 = variant == 2;
    o.wide_smem = variant == 3;
    o.tagged = variant == 4;
    EXPECT_EQ(device_library_name(o), std::string(GetParam()) + (variant == 1   ? "_simt"
                                                                 : variant == 2 ? "_simt_f16"
                                                                 : variant == 3 ? "_wide"
                                                                 : variant == 4 ? "_simt_tagged"
                                                                                : ""));
    const CompiledKernel k = compile_kernel(generate_megakernel_source(64), o);
    ASSERT_TRUE(is_elf(k.cubin)) << "size " << k.cubin.size();
    EXPECT_TRUE(contains(k.cubin, kMegakernelName));
    EXPECT_TRUE(contains(k.cubin, "weft_dev_run_queues"));
    EXPECT_GT(k.compile_ms, 0);
    EXPECT_GT(k.link_ms, 0);
    // The dynamic shared memory starts after the static block (the task loop's staged descriptors and slots, 1 KiB
    // the hardware reserves): at a multiple of 512 bytes (3584 up to round 17, 5632 on sm_90 and later since). A
    // 16-byte __shared__ flag elsewhere in the library moved it to 3600 and cost 4-6% per batch-8 token with every
    // executed instruction unchanged (H200, docs/perf.md round 17). New block-wide values go through registers and
    // barriers, or into the dynamic block.
    const int64_t static_smem = elf_section_size(k.cubin, std::string(".nv.shared.") + kMegakernelName);
    EXPECT_GT(static_smem, 0);
    EXPECT_EQ(static_smem % 512, 0) << "static shared memory of " << static_smem << " bytes";
    // Static (less the reserve) and dynamic together within what a block may opt into: 163 KiB on sm_80, 227 KiB
    // from sm_90 on; past it the launch fails.
    const int64_t dynamic = o.wide_smem ? WEFT_SMEM_BYTES_WIDE : WEFT_SMEM_BYTES_BASE;
    const int64_t most = has_wide ? 227 * 1024 : 163 * 1024;
    EXPECT_LE(static_smem - 1024 + dynamic, most) << "static " << static_smem << " + dynamic " << dynamic;
    std::cout << "[ timing   ] " << GetParam() << " (" << device_library_name(o) << ")"
              << " megakernel: NVRTC "
              << k.compile_ms << " ms, nvJitLink " << k.link_ms << " ms, cubin " << k.cubin.size() << " bytes\n";
    cubins.push_back(k.cubin);
  }
  EXPECT_NE(cubins[0], cubins[1]) << "both options linked the same device library";
  EXPECT_NE(cubins[2], cubins[1]) << "one_row_f16 linked the bf16 library without tensor-core tiles";
  EXPECT_NE(cubins[2], cubins[0]) << "one_row_f16 linked the full library";
  if (has_wide) {
    EXPECT_NE(cubins[3], cubins[0]) << "the wide option linked the full library";
    EXPECT_NE(cubins[3], cubins[1]) << "the wide option linked the library without tensor-core tiles";
    EXPECT_NE(cubins[4], cubins[1]) << "the tagged option linked the library without tagged hand-offs";
  } else {
    CompileOptions o{GetParam(), false, {}};
    o.wide_smem = true;
    EXPECT_THROW(compile_kernel(generate_megakernel_source(64), o), Error) << "sm_80 has no wide library";
  }
}

// The weight loader's library (sm_90 and later) holds its own kernel entry, linked alone: an executable cubin whose
// entry's registers let a block of WEFT_LOADER_LAUNCH_THREADS threads fit the register file (each of its four
// quarters holds every 4th warp's), whose static and dynamic shared memory fit a block, and which has no task loop
// apart; compile_kernel refuses to link it with a generated kernel.
TEST_P(DeviceCompileArch, WeightLoaderLibraryHasItsOwnKernel) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  if (std::string(GetParam()) == "sm_80") GTEST_SKIP() << "sm_80 has no weight loader's library (no bulk copies)";
  CompileOptions o{GetParam(), false, {}};
  o.tensor_cores = false;
  o.weight_loader = true;
  EXPECT_EQ(device_library_name(o), std::string(GetParam()) + "_simt_loader");
  const CompiledKernel k = library_kernel(o);
  ASSERT_TRUE(is_elf(k.cubin)) << "size " << k.cubin.size();
  EXPECT_EQ(k.cubin[0x10], 2) << "ELF type " << int(k.cubin[0x10]) << ": not an executable cubin";
  EXPECT_GT(k.link_ms, 0);
  const std::string entry = WEFT_LOADER_KERNEL_NAME;
  EXPECT_GT(elf_section_size(k.cubin, ".text." + entry), 0) << "no code for " << entry;
  // Every function the kernel may call runs on its registers.
  const int64_t regs = max_function_registers(k.cubin), warps_per_quarter = (WEFT_LOADER_LAUNCH_THREADS / WEFT_WARP_THREADS + 3) / 4;
  EXPECT_GT(regs, 0);
  EXPECT_LE(regs * WEFT_WARP_THREADS * warps_per_quarter, 65536 / 4) << regs << " registers per thread";
  const int64_t static_smem = elf_section_size(k.cubin, ".nv.shared." + entry);
  EXPECT_GT(static_smem, 0);
  EXPECT_LE(static_smem - 1024 + WEFT_SMEM_BYTES_LOADER, 227 * 1024) << "static " << static_smem;
  EXPECT_FALSE(contains(k.cubin, "weft_dev_run_queues"));
  EXPECT_THROW(compile_kernel(generate_megakernel_source(64), o), Error) << "linked with a generated kernel";
  o.weight_loader = false;
  EXPECT_THROW(library_kernel(o), Error) << "a library without its own kernel taken as one";
}

TEST_P(DeviceCompileArch, SyntaxErrorGivesTheNvrtcLog) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  const std::string src =
      "#include \"weft_device.h\"\n"
      "extern \"C\" __global__ void broken(int* p) {\n"
      "  p[0] = 1 +* ;  // weft_bad_line\n"
      "}\n";
  try {
    compile_kernel(src, CompileOptions{GetParam(), false, {}});
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC"), std::string::npos) << msg;
    EXPECT_NE(msg.find(GetParam()), std::string::npos) << msg;
    EXPECT_NE(msg.find("weft_kernel.cu(3)"), std::string::npos) << msg;  // file and line of the error
    EXPECT_NE(msg.find("weft_bad_line"), std::string::npos) << msg;     // the offending line, echoed
  }
}

INSTANTIATE_TEST_SUITE_P(DeviceCompile, DeviceCompileArch, ::testing::Values("sm_80", "sm_90a", "sm_100a"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(DeviceCompile, UnresolvedCallGivesTheNvJitLinkLog) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  const std::string src =
      "#include \"weft_device.h\"\n"
      "extern \"C\" __device__ void weft_dev_no_such_op(const weft_task_args*, const weft_env*, char*);\n"
      "extern \"C\" __global__ void k(const weft_task* t, const weft_env* e) {\n"
      "  extern __shared__ char smem[];\n"
      "  weft_dev_no_such_op(&t->args, e, smem);\n"
      "}\n";
  try {
    compile_kernel(src, CompileOptions{"sm_90a", false, {}});
    FAIL() << "expected a link error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nvJitLink"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weft_dev_no_such_op"), std::string::npos) << msg;
  }
}

TEST(DeviceCompile, UnknownArchIsAClearError) {
  for (const char* arch_name : {"sm_75", "sm_90", "compute_90a", ""}) {
    const std::string arch = arch_name;
    try {
      compile_kernel("#include \"weft_device.h\"\n", CompileOptions{arch, false, {}});
      FAIL() << "expected an error for '" << arch << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::unsupported);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + arch + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("sm_80, sm_90a, sm_100a"), std::string::npos) << msg;
    }
  }
}

TEST(DeviceCompile, ExtraFlagsReachNvrtc) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  const std::string src =
      "#include \"weft_device.h\"\n"
      "#ifndef WEFT_TEST_FLAG\n#error WEFT_TEST_FLAG missing\n#endif\n"
      "extern \"C\" __global__ void k(int* p) { p[0] = WEFT_TEST_FLAG; }\n";
  EXPECT_TRUE(is_elf(compile_kernel(src, CompileOptions{"sm_90a", false, {"-DWEFT_TEST_FLAG=7"}}).cubin));
  EXPECT_THROW(compile_kernel(src, CompileOptions{"sm_90a", false, {}}), Error);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The one file in `dir` whose name ends with `suffix`.
fs::path find_one(const fs::path& dir, const std::string& suffix) {
  fs::path found;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found = e.path();
      ++n;
    }
  }
  EXPECT_EQ(n, 1) << suffix << " in " << dir;
  return found;
}

TEST(DeviceCompile, DumpDirGetsSourceAndLogs) {
  const fs::path dir = fresh_dir("weft_dump_ok") / "nested";  // created on demand
  const std::string dir_s = dir.string();
  ScopedEnv env("WEFT_DUMP_DIR", &dir_s);
  const CompiledKernel k = compile_kernel(kEventsKernel, CompileOptions{"sm_90a", false, {}});
  const fs::path src = find_one(dir, "_kernel.cu");
  EXPECT_EQ(read_file(src), kEventsKernel);
  const std::string prefix = src.filename().string().substr(0, src.filename().string().size() - 9);
  EXPECT_EQ(prefix.size(), 13u);  // 12 hex digits and '_'
  EXPECT_TRUE(fs::exists(dir / (prefix + "nvrtc.log")));
  EXPECT_TRUE(fs::exists(dir / (prefix + "nvjitlink.log")));
  EXPECT_NE(read_file(dir / (prefix + "nvrtc.log")).find("--gpu-architecture=sm_90a"), std::string::npos);
  EXPECT_EQ(read_file(dir / (prefix + "kernel.cubin")).size(), k.cubin.size());
  fs::remove_all(dir.parent_path());
}

TEST(DeviceCompile, DumpDirKeepsTheLogOfAFailure) {
  const fs::path dir = fresh_dir("weft_dump_fail");
  const std::string dir_s = dir.string();
  ScopedEnv env("WEFT_DUMP_DIR", &dir_s);
  EXPECT_THROW(compile_kernel("#include \"weft_device.h\"\nint x = ;\n", CompileOptions{"sm_80", false, {}}), Error);
  const std::string log = read_file(find_one(dir, "_nvrtc.log"));
  EXPECT_NE(log.find("weft_kernel.cu(2)"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(find_one(dir, "_kernel.cu")));
  fs::remove_all(dir);
}

// The whole pipeline picks the device library from the lowered tasks and records it with the kernel: a batch-1
// specialization of a bf16 decoder links the one without tensor-core tiles (of an f16 decoder, its f16 variant),
// a batch-4 one the full library,
// which on sm_90a runs with the wide shared memory (WEFT_SMEM_BYTES_WIDE; sm_80: the base size, as every
// CUDA-core kernel); a cache hit returns what was recorded.
TEST(DeviceCompile, BatchOneDecodeLinksTheLibraryWithoutTensorCores) {
  ScopedEnv env("WEFT_DUMP_DIR", nullptr);
  TempKernelCache tmp("weft-devlib-choice");
  ASSERT_NE(tmp.kc, nullptr);
  cache::KernelCache& kc = *tmp.kc;
  {
    const Graph g = build_decoder_graph(test::tiny_decoder(1, 8, 64));
    for (int64_t batch : {1, 4}) {
      CompileRequest req;
      req.symbols = SymbolValues(g.symbols().size(), batch);
      const CompileResult fresh = compile_graph(g, req, &kc);
      ASSERT_FALSE(fresh.cache_hit);
      EXPECT_EQ(fresh.tensor_cores, batch > 1) << batch;
      EXPECT_EQ(fresh.smem_bytes, WEFT_SMEM_BYTES_BASE) << batch << ": its tiles fit the base size";
      EXPECT_NE(fresh.metadata.find("\"smem_bytes\":" + std::to_string(fresh.smem_bytes)), std::string::npos)
          << fresh.metadata;
      EXPECT_NE(fresh.metadata.find(batch > 1 ? "\"tensor_cores\":true" : "\"tensor_cores\":false"), std::string::npos)
          << fresh.metadata;
      EXPECT_EQ(fresh.device_library, batch > 1 ? "sm_90a" : "sm_90a_simt") << batch;
      EXPECT_NE(fresh.metadata.find("\"device_library\":\"" + fresh.device_library + "\""), std::string::npos)
          << fresh.metadata;
      const CompileResult hit = compile_graph(g, req, &kc);
      ASSERT_TRUE(hit.cache_hit);
      EXPECT_EQ(hit.tensor_cores, fresh.tensor_cores) << batch;
      EXPECT_EQ(hit.device_library, fresh.device_library) << batch;
      EXPECT_EQ(hit.smem_bytes, fresh.smem_bytes) << batch;
      EXPECT_EQ(hit.cubin, fresh.cubin) << batch;
    }
    // The same decoder in f16 links the library whose task loop inlines the one-row f16 tiles.
    DecoderShape half = test::tiny_decoder(1, 8, 64);
    half.dtype = DType::f16;
    const Graph hg = build_decoder_graph(half);
    CompileRequest one;
    one.symbols = SymbolValues(hg.symbols().size(), 1);
    const CompileResult f16 = compile_graph(hg, one, &kc);
    EXPECT_FALSE(f16.tensor_cores);
    EXPECT_EQ(f16.device_library, "sm_90a_simt_f16");
    EXPECT_EQ(compile_graph(hg, one, &kc).device_library, "sm_90a_simt_f16") << "a cache hit";
    // A Llama-3.2-1B layer at batch 8: its down projection (K 8192) fits 8 rows per tile only in the wide size.
    DecoderShape llama = llama_3_2_1b_shape();
    llama.layers = 1;
    llama.max_batch = 8;
    llama.max_seq = 64;
    const Graph lg = build_decoder_graph(llama);
    for (const char* arch : {"sm_90a", "sm_80"}) {
      CompileRequest req;
      req.arch = arch;
      req.symbols = SymbolValues(lg.symbols().size(), 8);
      const CompileResult r = compile_graph(lg, req, &kc);
      const bool wide = std::string(arch) == "sm_90a";
      EXPECT_TRUE(r.tensor_cores) << arch;
      EXPECT_EQ(r.device_library, std::string(arch) + (wide ? "_wide" : "")) << arch;
      EXPECT_EQ(r.smem_bytes, wide ? WEFT_SMEM_BYTES_WIDE : WEFT_SMEM_BYTES_BASE) << arch;
      EXPECT_NE(r.metadata.find("\"smem_bytes\":" + std::to_string(r.smem_bytes)), std::string::npos) << r.metadata;
      const CompileResult hit = compile_graph(lg, req, &kc);
      ASSERT_TRUE(hit.cache_hit) << arch;
      EXPECT_EQ(hit.smem_bytes, r.smem_bytes) << arch;
    }
  }
}

// compile_graph under each of `bad` values of environment variable `name`: an invalid_argument whose message reads
// "<name>='<value>': <expected>".
void expect_env_refused(const Graph& g, const CompileRequest& req, cache::KernelCache& kc, const char* name,
                        std::initializer_list<const char*> bad, const std::string& expected) {
  for (const std::string value : bad) {
    ScopedEnv b(name, &value);
    try {
      compile_graph(g, req, &kc);
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument) << value;
      EXPECT_NE(std::string(e.what()).find(std::string(name) + "='" + value + "': " + expected), std::string::npos)
          << e.what();
    }
  }
}

// compile_graph of `g` with environment variable `name` unset, then set to `value` (left set on return, through
// `scope`): the second misses the cache under a key of its own and hits under it after. Returns that key; `unset_key`
// gets the first.
std::string expect_env_enters_key(const Graph& g, const CompileRequest& req, cache::KernelCache& kc, const char* name,
                                  const std::string& value, std::optional<ScopedEnv>& scope, std::string& unset_key) {
  {
    ScopedEnv unset(name, nullptr);
    unset_key = compile_graph(g, req, &kc).key_hex;
  }
  scope.emplace(name, &value);
  const CompileResult r = compile_graph(g, req, &kc);
  EXPECT_FALSE(r.cache_hit) << name << "=" << value;
  EXPECT_NE(r.key_hex, unset_key) << name << "=" << value;
  EXPECT_TRUE(compile_graph(g, req, &kc).cache_hit) << name << "=" << value;
  return r.key_hex;
}

// A lowering knob `name` that changes the tables of a batch-8 decoder: `value` enters the cache key, and each of
// `bad` is an invalid_argument naming the variable and what was `expected`, before anything compiles.
void expect_lowering_knob_enters_the_key(const char* name, const char* value, std::initializer_list<const char*> bad,
                                         const std::string& expected) {
  ScopedEnv dump("WEFT_DUMP_DIR", nullptr);
  TempKernelCache tmp(std::string("weft-knob-") + name);
  ASSERT_NE(tmp.kc, nullptr);
  cache::KernelCache& kc = *tmp.kc;
  const Graph g = build_decoder_graph(test::tiny_decoder(1, 8, 64));
  CompileRequest req;
  req.symbols = SymbolValues(g.symbols().size(), 8);
  std::optional<ScopedEnv> knob;
  std::string unset_key;
  expect_env_enters_key(g, req, kc, name, value, knob, unset_key);
  expect_env_refused(g, req, kc, name, bad, expected);
}

// $WEFT_SPLIT_K_PARTS raises the split of the plain tensor-core linears (LowerOptions::split_k_parts): a power of two
// from 1 to WEFT_MMA_MAX_SPLIT.
TEST(DeviceCompile, SplitKPartsEnterTheKey) {
  expect_lowering_knob_enters_the_key("WEFT_SPLIT_K_PARTS", "4", {"0", "3", "32", "x", "2x"},
                                      "expected a power of two from 1 to " + std::to_string(WEFT_MMA_MAX_SPLIT));
}

// $WEFT_ATTENTION_PAIRS (LowerOptions::attention_pairs): 0 pairs no attention tiles' kv heads, 1 pairs them whatever
// the cache's length.
TEST(DeviceCompile, AttentionPairsEnterTheKey) {
  expect_lowering_knob_enters_the_key("WEFT_ATTENTION_PAIRS", "0", {"2", "x", "01", "-1"}, "expected 0 or 1");
  expect_lowering_knob_enters_the_key("WEFT_ATTENTION_PAIRS", "1", {}, "");
}

// $WEFT_RESERVED_SMS caps the SMs attention's producer leaves free: it changes the grids, so it enters the key; a value
// outside 0..1024 is refused naming the variable.
TEST(DeviceCompile, ReservedSmsEnterTheKey) {
  expect_lowering_knob_enters_the_key("WEFT_RESERVED_SMS", "0", {"-1", "1025", "x", "8x"},
                                      "expected a whole number from 0 to 1024");
  expect_lowering_knob_enters_the_key("WEFT_RESERVED_SMS", "64", {}, "");
}

// $WEFT_ATTENTION_SPLIT caps the parts of a split attention tile: it changes the tables, so it enters the cache
// key (the same graph compiles again under another value, and hits under its own); a value outside 1..8 is an
// invalid_argument naming the variable and the range, before anything compiles.
TEST(DeviceCompile, AttentionSplitLimitEntersTheKey) {
  ScopedEnv dump("WEFT_DUMP_DIR", nullptr);
  TempKernelCache tmp("weft-attn-split");
  ASSERT_NE(tmp.kc, nullptr);
  cache::KernelCache& kc = *tmp.kc;
  {
    const Graph g = build_decoder_graph(test::tiny_decoder(1, 8, 64));
    CompileRequest req;
    req.symbols = SymbolValues(g.symbols().size(), 1);
    std::string first_key;
    std::optional<ScopedEnv> split;
    const std::string one_key = expect_env_enters_key(g, req, kc, "WEFT_ATTENTION_SPLIT", "1", split, first_key);
    expect_env_refused(g, req, kc, "WEFT_ATTENTION_SPLIT", {"0", "9", "x", "2x"}, "expected a whole number from 1 to 8");
    // CompileRequest::attention_split says the same as the variable, and wins over it: 1 is the entry compiled under
    // WEFT_ATTENTION_SPLIT=1 (a hit whatever the variable says now), 0 leaves the variable's.
    const std::string eight = "8";
    ScopedEnv split8("WEFT_ATTENTION_SPLIT", &eight);
    CompileRequest one_req = req;
    one_req.attention_split = 1;
    const CompileResult by_request = compile_graph(g, one_req, &kc);
    EXPECT_TRUE(by_request.cache_hit);
    EXPECT_EQ(by_request.key_hex, one_key);
    EXPECT_EQ(compile_graph(g, req, &kc).key_hex, first_key);
    for (int32_t bad : {-1, WEFT_ATTN_MAX_SPLIT + 1}) {
      one_req.attention_split = bad;
      try {
        compile_graph(g, one_req, &kc);
        ADD_FAILURE() << "attention_split " << bad << " was taken";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("attention_split " + std::to_string(bad) + ": expected 0"), std::string::npos)
            << e.what();
      }
    }
  }
}

// $WEFT_WEIGHT_LOADER=1: a kernel of one-row bf16 tiles on sm_90 and later links the weight loader's library
// ("<arch>_simt_loader") and launches its kernel with its shared memory (metadata and cache hits say so); where it
// does not apply (tensor-core tiles, more tensors than its kernel takes, sm_80, x rows past the ops' share) the library
// is the one without it. The switch enters the cache key; a value other than 0 or 1 is an invalid_argument naming the
// variable.
TEST(DeviceCompile, WeightLoaderLinksItsLibraryWhereItApplies) {
  ScopedEnv dump("WEFT_DUMP_DIR", nullptr);
  TempKernelCache tmp("weft-weight-loader");
  ASSERT_NE(tmp.kc, nullptr);
  cache::KernelCache& kc = *tmp.kc;
  {
    const Graph g = build_decoder_graph(test::tiny_decoder(1, 8, 64));
    CompileRequest one;
    one.symbols = SymbolValues(g.symbols().size(), 1);
    std::string plain_key;
    {
      ScopedEnv off("WEFT_WEIGHT_LOADER", nullptr);
      const CompileResult r = compile_graph(g, one, &kc);
      EXPECT_EQ(r.device_library, "sm_90a_simt");
      EXPECT_EQ(r.smem_bytes, WEFT_SMEM_BYTES_BASE);
      EXPECT_EQ(r.kernel_name, kMegakernelName);
      EXPECT_EQ(r.launch_threads, WEFT_LAUNCH_THREADS);
      plain_key = r.key_hex;
    }
    const std::string on = "1";
    ScopedEnv loader("WEFT_WEIGHT_LOADER", &on);
    const CompileResult r = compile_graph(g, one, &kc);
    EXPECT_FALSE(r.cache_hit) << "the switch is not in the key";
    EXPECT_NE(r.key_hex, plain_key);
    EXPECT_EQ(r.device_library, "sm_90a_simt_loader");
    EXPECT_EQ(r.smem_bytes, WEFT_SMEM_BYTES_LOADER);
    EXPECT_NE(r.metadata.find("\"smem_bytes\":" + std::to_string(r.smem_bytes)), std::string::npos) << r.metadata;
    const CompileResult hit = compile_graph(g, one, &kc);
    ASSERT_TRUE(hit.cache_hit);
    EXPECT_EQ(hit.device_library, r.device_library);
    EXPECT_EQ(hit.smem_bytes, r.smem_bytes);
    // Its kernel is the library's own (loader_entry.cuh), of a warp more.
    EXPECT_EQ(r.kernel_name, WEFT_LOADER_KERNEL_NAME);
    EXPECT_EQ(r.launch_threads, WEFT_LOADER_LAUNCH_THREADS);
    EXPECT_EQ(hit.kernel_name, r.kernel_name);
    EXPECT_EQ(hit.launch_threads, r.launch_threads);
    // Where it does not apply: tensor-core tiles (batch 4), an arch without bulk copies (sm_80), below.
    CompileRequest four = one;
    four.symbols = SymbolValues(g.symbols().size(), 4);
    EXPECT_EQ(compile_graph(g, four, &kc).device_library, "sm_90a");
    // More tensors than the loader's kernel entry takes (WEFT_LOADER_ENTRY_SLOTS) keep the generated kernel.
    const Graph deep = build_decoder_graph(test::tiny_decoder(120, 1, 64));
    ASSERT_GT(deep.tensors().size(), static_cast<size_t>(WEFT_LOADER_ENTRY_SLOTS));
    CompileRequest d1;
    d1.symbols = SymbolValues(deep.symbols().size(), 1);
    const CompileResult many = compile_graph(deep, d1, &kc);
    EXPECT_EQ(many.device_library, "sm_90a_simt");
    EXPECT_EQ(many.kernel_name, kMegakernelName);
    CompileRequest a100 = one;
    a100.arch = "sm_80";
    const CompileResult old = compile_graph(g, a100, &kc);
    EXPECT_EQ(old.device_library, "sm_80_simt");
    EXPECT_EQ(old.smem_bytes, WEFT_SMEM_BYTES_BASE);
    // x rows past the ops' share: a one-row down projection of K 16384 (32 KiB of x) keeps the library without it.
    DecoderShape wide = test::tiny_decoder(1, 1, 64);
    wide.ffn = 16384;
    const Graph wg = build_decoder_graph(wide);
    CompileRequest w1;
    w1.symbols = SymbolValues(wg.symbols().size(), 1);
    EXPECT_EQ(compile_graph(wg, w1, &kc).device_library, "sm_90a_simt");
    expect_env_refused(g, one, kc, "WEFT_WEIGHT_LOADER", {"2", "yes"}, "expected 0 or 1");
  }
}

// $WEFT_DEVICE_LIBRARY_DIR: the kernel links the folder's cubin instead of the embedded one, a missing one is an
// io error naming the file, and the folder's bytes enter the library version (so the cache keys).
TEST(DeviceCompile, LibraryOverrideReplacesTheEmbeddedLibrary) {
  ScopedEnv dump("WEFT_DUMP_DIR", nullptr);
  char tmpl[] = "/tmp/weft-devlib-override-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, embedded = device_library_version();
  const fs::path cubin = fs::path(dir) / "weft_devlib_sm_90a.cubin";
  {
    ScopedEnv env("WEFT_DEVICE_LIBRARY_DIR", &dir);
    try {
      compile_kernel(kEventsKernel, CompileOptions{"sm_90a", true, {}});
      ADD_FAILURE() << "linked without the override's cubin";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::io);
      EXPECT_NE(std::string(e.what()).find(cubin.string()), std::string::npos) << e.what();
    }
    const devlib::EmbeddedBinary lib = devlib::library_cubin("sm_90a");
    ASSERT_NE(lib.data, nullptr);
    std::ofstream(cubin, std::ios::binary).write(reinterpret_cast<const char*>(lib.data), static_cast<std::streamsize>(lib.size));
    const CompiledKernel k = compile_kernel(kEventsKernel, CompileOptions{"sm_90a", true, {}});
    EXPECT_TRUE(is_elf(k.cubin));
    EXPECT_TRUE(contains(k.cubin, "weft_event_wait"));
    const std::string v1 = device_library_version();
    EXPECT_EQ(v1.rfind(embedded + "+override-", 0), 0u) << v1;
    EXPECT_EQ(device_library_version(), v1);
    std::ofstream(cubin, std::ios::binary | std::ios::app).put('\0');
    EXPECT_NE(device_library_version(), v1);
  }
  EXPECT_EQ(device_library_version(), embedded);
  fs::remove_all(dir);
}

TEST(DeviceCompile, Versions) {
  const std::string v = device_library_version();
  EXPECT_EQ(v.size(), 16u);
  EXPECT_EQ(v.find_first_not_of("0123456789abcdef"), std::string::npos) << v;
  EXPECT_EQ(device_library_version(), v);
  EXPECT_NE(nvrtc_version().find('.'), std::string::npos);
  EXPECT_NE(nvjitlink_version().find('.'), std::string::npos);
  EXPECT_EQ(supported_archs(), (std::vector<std::string>{"sm_80", "sm_90a", "sm_100a"}));
}

}  // namespace
}  // namespace weft
