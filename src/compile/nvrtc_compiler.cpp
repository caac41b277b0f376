// NVRTC + nvJitLink. Why relocatable cubins and not LTO: measured on the 2-core build machine for sm_90a, a
// small generated megakernel calling 7 ops took ~45-60 ms in total this way (NVRTC ~45 ms, link ~2 ms);
// LTO (NVRTC -dlto, the library as LTO-IR, nvJitLink -lto) took ~17.5 s, since every JIT link runs the
// optimizer and ptxas over the whole library again; compiling library and kernel as one NVRTC source took
// ~16 s. The device functions are called once per task, so the call across the link boundary costs nothing
// that matters.
#include "compile/nvrtc_compiler.hpp"

#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "compile/embedded_device_library.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace weft {

namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 3> kArchs{"sm_80", "sm_90a", "sm_100a"};
constexpr const char* kProgramName = "weft_kernel.cu";

std::string archs_list() {
  std::string s;
  for (const char* a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A log as text: without the trailing NUL (and blank lines) the C APIs leave.
std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// ---- CUDA headers ----
// The generated source needs none (weft_device.h is embedded and includes no CUDA header), but code that
// includes <cuda_bf16.h> or CCCL headers gets CUDA's include folder, found as the toolkit is usually found.
struct CudaIncludes {
  std::vector<std::string> dirs;  // empty when not found
  std::string searched;           // where we looked, for the error message
};

CudaIncludes find_cuda_includes() {
  CudaIncludes r;
  const auto candidate = [&](const char* what, const char* root) {
    if (!r.dirs.empty()) return;
    if (root == nullptr || *root == '\0') {
      r.searched += std::string(r.searched.empty() ? "" : ", ") + what + " (not set)";
      return;
    }
    const fs::path inc = fs::path(root) / "include";
    std::error_code ec;
    const bool found = fs::exists(inc / "cuda_fp16.h", ec);
    r.searched += std::string(r.searched.empty() ? "" : ", ") + what + " = " + inc.string() + (found ? "" : " (no cuda_fp16.h)");
    if (!found) return;
    if (fs::exists(inc / "cccl", ec)) r.dirs.push_back((inc / "cccl").string());  // CUDA 13 keeps CCCL here
    r.dirs.push_back(inc.string());
  };
  candidate("$CUDA_HOME/include", std::getenv("CUDA_HOME"));
  candidate("$CUDA_PATH/include", std::getenv("CUDA_PATH"));
  candidate("/usr/local/cuda/include", "/usr/local/cuda");
  return r;
}

// ---- $WEFT_DUMP_DIR ----

class Dump {
 public:
  Dump(const std::string& source, const CompileOptions& o) {
    const char* dir = std::getenv("WEFT_DUMP_DIR");
    if (dir == nullptr || *dir == '\0') return;
    dir_ = dir;
    std::string key = source;
    key += '\0' + o.arch;
    key.push_back(o.line_info ? '1' : '0');
    key.push_back(o.tensor_cores ? '1' : '0');
    key.push_back(o.wide_smem ? '1' : '0');
    key.push_back(o.one_row_f16 ? '1' : '0');
    key.push_back(o.weight_loader ? '1' : '0');
    for (const std::string& f : o.extra_flags) key += '\0' + f;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
    prefix_ = std::string(hex, 12) + "_";
  }

  // Best effort: a dump that cannot be written is a warning, never a failed compile.
  void write(const std::string& name, std::string_view content) const {
    if (dir_.empty()) return;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const fs::path path = fs::path(dir_) / (prefix_ + name);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!f) log_warning("WEFT_DUMP_DIR: could not write " + path.string());
  }

 private:
  std::string dir_, prefix_;
};

// ---- NVRTC ----

struct NvrtcProgram {
  nvrtcProgram p = nullptr;
  ~NvrtcProgram() {
    if (p != nullptr) nvrtcDestroyProgram(&p);
  }
};

std::string nvrtc_log(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return {};
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  return trimmed(std::move(log));
}

[[noreturn]] void nvrtc_fail(const std::string& what, nvrtcResult r) {
  fail(Status::compile, "NVRTC " + what + " failed: " + nvrtcGetErrorString(r));
}

// The generated source as relocatable device code (a cubin with unresolved calls into the library).
std::vector<char> nvrtc_compile(const std::string& source, const CompileOptions& o, std::string& log, const Dump& dump) {
  const auto& hdrs = devlib::headers();
  std::vector<const char*> names, bodies;
  for (const auto& h : hdrs) {
    names.push_back(h.name);
    bodies.push_back(h.data);
  }
  const CudaIncludes cuda = find_cuda_includes();
  std::vector<std::string> opts = {"--gpu-architecture=" + o.arch, "--relocatable-device-code=true", "--std=c++17"};
  if (o.line_info) opts.push_back("--generate-line-info");
  for (const std::string& d : cuda.dirs) opts.push_back("--include-path=" + d);
  opts.insert(opts.end(), o.extra_flags.begin(), o.extra_flags.end());
  std::vector<const char*> copts;
  for (const std::string& s : opts) copts.push_back(s.c_str());

  NvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog.p, source.c_str(), kProgramName, static_cast<int>(names.size()),
                                     bodies.data(), names.data());
  if (r != NVRTC_SUCCESS) nvrtc_fail("nvrtcCreateProgram", r);
  r = nvrtcCompileProgram(prog.p, static_cast<int>(copts.size()), copts.data());
  log = nvrtc_log(prog.p);
  std::string opt_line;
  for (const std::string& s : opts) opt_line += " " + s;
  dump.write("nvrtc.log", "options:" + opt_line + "\n" + log + "\n");
  if (r != NVRTC_SUCCESS) {
    std::string msg = "NVRTC failed to compile the generated kernel for " + o.arch + " (" + nvrtcGetErrorString(r) +
                      "); log:\n" + log;
    if (log.find("cannot open source file") != std::string::npos && cuda.dirs.empty())
      msg += "\nCUDA's headers were not found (looked at " + cuda.searched +
             "); set CUDA_HOME to the CUDA toolkit's folder.";
    fail(Status::compile, msg);
  }
  size_t n = 0;
  if ((r = nvrtcGetCUBINSize(prog.p, &n)) != NVRTC_SUCCESS) nvrtc_fail("nvrtcGetCUBINSize", r);
  std::vector<char> cubin(n);
  if ((r = nvrtcGetCUBIN(prog.p, cubin.data())) != NVRTC_SUCCESS) nvrtc_fail("nvrtcGetCUBIN", r);
  return cubin;
}

// ---- nvJitLink ----

const char* jitlink_result_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "success";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "unrecognized option";
    case NVJITLINK_ERROR_MISSING_ARCH: return "missing -arch";
    case NVJITLINK_ERROR_INVALID_INPUT: return "invalid input";
    case NVJITLINK_ERROR_PTX_COMPILE: return "PTX compile error";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVVM compile error";
    case NVJITLINK_ERROR_INTERNAL: return "internal error";
    default: return "error";
  }
}

struct JitLink {
  nvJitLinkHandle h = nullptr;
  ~JitLink() {
    if (h != nullptr) nvJitLinkDestroy(&h);
  }
  std::string error_log() const {
    size_t n = 0;
    if (nvJitLinkGetErrorLogSize(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    if (nvJitLinkGetErrorLog(h, s.data()) != NVJITLINK_SUCCESS) return {};
    return trimmed(std::move(s));
  }
  std::string info_log() const {
    size_t n = 0;
    if (nvJitLinkGetInfoLogSize(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    if (nvJitLinkGetInfoLog(h, s.data()) != NVJITLINK_SUCCESS) return {};
    return trimmed(std::move(s));
  }
};

// ---- the device library override ----
// $WEFT_DEVICE_LIBRARY_DIR (development only): a folder of device library cubins built elsewhere, named as the
// build names them (weft_devlib_<library>.cubin, nvcc's command in CMakeLists.txt), which replace the embedded
// ones. Device code can then be changed and measured on a GPU machine that has nvcc but not the libraries
// libweft links (LLVM, SQLite), without relinking libweft: ptxas of the inlined task loop is most of a build.
// The cubins must come from the same device sources' ABI (task_abi.h); their bytes enter
// device_library_version(), so kernels linked against them never share cache entries with the embedded ones.
const char* library_override_dir() {
  const char* dir = std::getenv("WEFT_DEVICE_LIBRARY_DIR");
  return dir != nullptr && *dir != '\0' ? dir : nullptr;
}

// A whole file; empty when it cannot be read.
std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<char> read_library_override(const std::string& dir, const std::string& library) {
  const fs::path path = fs::path(dir) / ("weft_devlib_" + library + ".cubin");
  std::vector<char> bytes = file_bytes(path);
  if (bytes.empty())
    fail(Status::io, "WEFT_DEVICE_LIBRARY_DIR is set, but " + path.string() +
                         " is missing, unreadable or empty (the device library " + library + " this kernel links; "
                         "unset the variable to use the embedded one)");
  return bytes;
}

}  // namespace

std::string device_library_name(const CompileOptions& o) {
  if (!o.tensor_cores)
    return o.arch + (o.one_row_f16     ? "_simt_f16"
                     : o.weight_loader ? "_simt_loader"
                     : o.tagged        ? "_simt_tagged"
                                       : "_simt");
  return o.wide_smem ? o.arch + "_wide" : o.arch;
}

namespace {

// The device library `library`'s cubin: embedded, or from $WEFT_DEVICE_LIBRARY_DIR (then held by `replaced`).
devlib::EmbeddedBinary library_binary(const std::string& library, std::vector<char>& replaced) {
  devlib::EmbeddedBinary lib = devlib::library_cubin(library);
  if (const char* dir = library_override_dir()) {
    replaced = read_library_override(dir, library);
    lib = {reinterpret_cast<const unsigned char*>(replaced.data()), replaced.size()};
  }
  if (lib.data == nullptr || lib.size == 0)
    fail(Status::internal, "the device library " + library + " is not embedded in this build of libweft");
  return lib;
}

// Links the generated kernel (or, null, nothing but the library: the weight loader's, whose kernel is its own).
std::vector<char> jit_link(const std::vector<char>* kernel, const CompileOptions& o, std::string& log, const Dump& dump) {
  const std::string& arch = o.arch;
  const std::string library = device_library_name(o);
  std::vector<char> replaced;
  const devlib::EmbeddedBinary lib = library_binary(library, replaced);
  const std::string arch_opt = "-arch=" + arch;
  const char* opts[] = {arch_opt.c_str()};
  JitLink link;
  nvJitLinkResult r = nvJitLinkCreate(&link.h, 1, opts);
  if (r != NVJITLINK_SUCCESS)
    fail(Status::compile, std::string("nvJitLinkCreate failed: ") + jitlink_result_name(r) + " (" +
                              std::to_string(static_cast<int>(r)) + ")");
  const std::string lib_name = "weft_device_library_" + library;
  if (kernel) r = nvJitLinkAddData(link.h, NVJITLINK_INPUT_CUBIN, kernel->data(), kernel->size(), kProgramName);
  if (r == NVJITLINK_SUCCESS) r = nvJitLinkAddData(link.h, NVJITLINK_INPUT_CUBIN, lib.data, lib.size, lib_name.c_str());
  if (r == NVJITLINK_SUCCESS) r = nvJitLinkComplete(link.h);
  const std::string errors = link.error_log(), info = link.info_log();
  log = info;
  dump.write("nvjitlink.log", "options: " + arch_opt + "\nlibrary: " + library + "\n" + info + (errors.empty() ? "" : "\n" + errors) + "\n");
  if (r != NVJITLINK_SUCCESS)
    fail(Status::compile, std::string("nvJitLink failed to link ") + (kernel ? "the generated kernel with " : "") +
                              "the device library " + library + " (" +
                              jitlink_result_name(r) + ", " + std::to_string(static_cast<int>(r)) + "); log:\n" +
                              errors + (info.empty() ? "" : "\n" + info));
  size_t n = 0;
  if ((r = nvJitLinkGetLinkedCubinSize(link.h, &n)) != NVJITLINK_SUCCESS)
    fail(Status::compile, std::string("nvJitLinkGetLinkedCubinSize failed: ") + jitlink_result_name(r));
  std::vector<char> cubin(n);
  if ((r = nvJitLinkGetLinkedCubin(link.h, cubin.data())) != NVJITLINK_SUCCESS)
    fail(Status::compile, std::string("nvJitLinkGetLinkedCubin failed: ") + jitlink_result_name(r));
  return cubin;
}

}  // namespace

CompiledKernel compile_kernel(const std::string& generated_source, const CompileOptions& options) {
  bool known = false;
  for (const char* a : kArchs) known = known || options.arch == a;
  if (!known)
    fail(Status::unsupported, "target architecture '" + options.arch + "' is not supported; expected one of " +
                                  archs_list() + " (the architectures the device library is built for)");
  if (options.weight_loader)
    fail(Status::internal, "the weight loader's device library " + device_library_name(options) +
                               " has its own kernel entry and is not linked with a generated one (library_kernel)");
  const Dump dump(generated_source, options);
  dump.write("kernel.cu", generated_source);

  CompiledKernel out;
  std::string nvrtc_msgs, link_msgs;
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<char> relocatable = nvrtc_compile(generated_source, options, nvrtc_msgs, dump);
  out.compile_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  out.cubin = jit_link(&relocatable, options, link_msgs, dump);
  out.link_ms = ms_since(t0);
  if (!nvrtc_msgs.empty()) out.log += "NVRTC:\n" + nvrtc_msgs + "\n";
  if (!link_msgs.empty()) out.log += "nvJitLink:\n" + link_msgs + "\n";
  dump.write("kernel.cubin", std::string_view(out.cubin.data(), out.cubin.size()));
  return out;
}

CompiledKernel library_kernel(const CompileOptions& options) {
  if (!options.weight_loader)
    fail(Status::internal, "only the weight loader's device library has its own kernel entry (" +
                               device_library_name(options) + " is linked with a generated one)");
  const Dump dump("", options);
  CompiledKernel out;
  const auto t0 = std::chrono::steady_clock::now();
  out.cubin = jit_link(nullptr, options, out.log, dump);
  out.link_ms = ms_since(t0);
  if (!out.log.empty()) out.log = "nvJitLink:\n" + out.log + "\n";
  dump.write("kernel.cubin", std::string_view(out.cubin.data(), out.cubin.size()));
  return out;
}

std::string device_library_version() {
  const char* dir = library_override_dir();
  if (dir == nullptr) return devlib::version();
  // Every cubin the override folder holds, by name and bytes, in name order.
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("weft_devlib_", 0) == 0 && e.path().extension() == ".cubin") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string digest;
  for (const fs::path& f : files) {
    const std::vector<char> bytes = file_bytes(f);
    digest += f.filename().string() + ':' + std::to_string(XXH3_64bits(bytes.data(), bytes.size())) + ';';
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(digest.data(), digest.size())));
  return std::string(devlib::version()) + "+override-" + hex;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvjitlink_version() {
  unsigned int major = 0, minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> supported_archs() { return {kArchs.begin(), kArchs.end()}; }

}  // namespace weft
