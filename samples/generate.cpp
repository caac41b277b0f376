// Greedy generation from a Hugging Face Llama / Qwen3 folder through weft's C API:
//
//   weft_generate MODEL_DIR --prompt-ids 1,2,3[;4,5,6...] --steps 64 [--mode step|loop|resident]
//                 [--backend auto|gpu|reference] [--force-ids a,b,..[;...]] [--logits-out FILE] [--json FILE]
//                 [--max-seq N] [--max-batch N]
//
// Rows of --prompt-ids (separated by ';', all the same length) are the batch. Prints each row's generated ids
// and the per-token latency. --force-ids feeds the given tokens instead of the argmax from step 1 on (teacher
// forcing); --logits-out writes every step's logits as raw f32 [steps][batch][vocab]; --json writes the result.
#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "weft_generate: %s\n", message.c_str());
  std::exit(1);
}

void check(weft_status s, const char* what) {
  if (s != WEFT_OK) die(std::string(what) + " failed (" + weft_status_string(s) + "): " + weft_last_error_message());
}

// "1,2,3;4,5,6" -> rows of ids.
std::vector<std::vector<int32_t>> parse_rows(const std::string& text, const char* flag) {
  std::vector<std::vector<int32_t>> rows;
  std::stringstream rs(text);
  std::string row;
  while (std::getline(rs, row, ';')) {
    std::vector<int32_t> ids;
    std::stringstream is(row);
    std::string id;
    while (std::getline(is, id, ',')) {
      char* end = nullptr;
      const long v = std::strtol(id.c_str(), &end, 10);
      if (id.empty() || *end != '\0' || v < 0 || v > 0x7fffffff) die(std::string(flag) + ": '" + id + "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) die(std::string(flag) + ": an empty row");
    rows.push_back(std::move(ids));
  }
  if (rows.empty()) die(std::string(flag) + ": no ids");
  return rows;
}

int32_t parse_count(const char* text, const char* flag) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1000000) die(std::string(flag) + ": '" + text + "' is not a count");
  return static_cast<int32_t>(v);
}

double percentile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') die("usage: weft_generate MODEL_DIR --prompt-ids 1,2,3[;4,5,6] --steps N [options]");
  const std::string dir = argv[1];
  std::string prompt_text = "1", force_text, logits_path, json_path, mode = "step", backend = "auto";
  int32_t steps = 16, max_seq = 0, max_batch = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--prompt-ids") prompt_text = value;
    else if (flag == "--steps") steps = parse_count(value, "--steps");
    else if (flag == "--mode") mode = value;
    else if (flag == "--backend") backend = value;
    else if (flag == "--force-ids") force_text = value;
    else if (flag == "--logits-out") logits_path = value;
    else if (flag == "--json") json_path = value;
    else if (flag == "--max-seq") max_seq = parse_count(value, "--max-seq");
    else if (flag == "--max-batch") max_batch = parse_count(value, "--max-batch");
    else die("unknown option " + flag);
  }
  if (mode != "step" && mode != "loop" && mode != "resident") die("--mode is '" + mode + "'; expected step, loop or resident");
  const auto prompts = parse_rows(prompt_text, "--prompt-ids");
  const auto batch = static_cast<int32_t>(prompts.size());
  const auto prompt_len = static_cast<int32_t>(prompts[0].size());
  std::vector<int32_t> prompt_ids;
  for (const auto& r : prompts) {
    if (static_cast<int32_t>(r.size()) != prompt_len) die("--prompt-ids: every row needs the same length");
    prompt_ids.insert(prompt_ids.end(), r.begin(), r.end());
  }
  std::vector<int32_t> forced;
  if (!force_text.empty()) {
    const auto rows = parse_rows(force_text, "--force-ids");
    if (static_cast<int32_t>(rows.size()) != batch) die("--force-ids needs one row per prompt row");
    for (const auto& r : rows) {
      if (static_cast<int32_t>(r.size()) < steps - 1) die("--force-ids: each row needs at least steps - 1 ids");
      for (int32_t j = 0; j < steps; ++j) forced.push_back(j < static_cast<int32_t>(r.size()) ? r[static_cast<size_t>(j)] : 0);
    }
  }

  weft_context* ctx = nullptr;
  check(weft_context_create(nullptr, &ctx), "weft_context_create");
  weft_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.backend = backend == "gpu" ? WEFT_BACKEND_GPU : backend == "reference" ? WEFT_BACKEND_REFERENCE : WEFT_BACKEND_AUTO;
  if (backend != "gpu" && backend != "reference" && backend != "auto") die("--backend is '" + backend + "'; expected auto, gpu or reference");
  mo.max_batch = std::max(max_batch, batch);
  mo.max_seq = max_seq;
  int32_t devices = 0;
  const bool have_gpu = weft_device_count(&devices) == WEFT_OK && devices > 0;
  const std::string no_gpu_reason = have_gpu ? "" : weft_last_error_message();
  weft_model* model = nullptr;
  check(weft_model_load(ctx, dir.c_str(), &mo, &model), "weft_model_load");
  weft_model_info info{};
  info.struct_size = sizeof info;
  check(weft_model_get_info(model, &info), "weft_model_get_info");
  std::printf("model: %s, %d layers, hidden %d, %d/%d heads of %d, ffn %d, vocab %d, %.1f MB of weights\n", info.model_type,
              info.layers, info.hidden, info.q_heads, info.kv_heads, info.head_dim, info.ffn, info.vocab,
              static_cast<double>(info.weight_bytes) / 1e6);
  if (info.backend == WEFT_BACKEND_GPU) std::printf("running on the GPU: %s\n", info.device);
  else std::printf("running on the %s%s%s\n", info.device, have_gpu ? "" : " because there is no GPU: ", no_gpu_reason.c_str());

  weft_compile_report cr{};
  cr.struct_size = sizeof cr;
  check(weft_model_compile(model, batch, &cr), "weft_model_compile");
  std::printf("megakernel for batch %d: %s in %.1f ms (%lld tasks, %lld events, %lld queues, cubin %lld bytes, key %.12s)\n", batch,
              cr.cache_hit ? "loaded from the kernel cache" : "compiled", cr.total_ms, static_cast<long long>(cr.num_tasks),
              static_cast<long long>(cr.num_events), static_cast<long long>(cr.num_queues), static_cast<long long>(cr.cubin_bytes), cr.key);

  std::vector<int32_t> tokens(static_cast<size_t>(batch) * static_cast<size_t>(steps));
  std::vector<float> step_ms(static_cast<size_t>(steps));
  std::vector<float> logits(logits_path.empty() ? 0 : static_cast<size_t>(steps) * static_cast<size_t>(batch) * static_cast<size_t>(info.vocab));
  weft_generate_request rq{};
  rq.struct_size = sizeof rq;
  rq.batch = batch;
  rq.prompt_len = prompt_len;
  rq.steps = steps;
  rq.prompt_ids = prompt_ids.data();
  rq.forced_ids = forced.empty() ? nullptr : forced.data();
  rq.multi_step = mode != "step";
  // Resident mode: the host sees each step's tokens as the kernel finishes it (a streaming caller's view); the
  // gaps between their arrivals are the per-token latency such a caller gets.
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  if (mode == "resident") {
    arrivals.reserve(static_cast<size_t>(steps));
    rq.on_step = [](void* user, int32_t, const int32_t*, int32_t) -> int32_t {
      static_cast<std::vector<std::chrono::steady_clock::time_point>*>(user)->push_back(std::chrono::steady_clock::now());
      return 0;
    };
    rq.on_step_user = &arrivals;
  }
  rq.out_tokens = tokens.data();
  rq.out_logits = logits.empty() ? nullptr : logits.data();
  rq.out_step_ms = step_ms.data();
  weft_generate_report rep{};
  rep.struct_size = sizeof rep;
  check(weft_model_generate(model, &rq, &rep), "weft_model_generate");

  for (int32_t b = 0; b < batch; ++b) {
    std::printf("row %d:", b);
    for (int32_t j = 0; j < steps; ++j) std::printf(" %d", tokens[static_cast<size_t>(b * steps + j)]);
    std::printf("\n");
  }
  const double median = percentile(step_ms, 0.5);
  std::printf("prefill: %d positions in %.3f ms\n", prompt_len - 1, rep.prefill_ms);
  std::printf("per-token latency (%s, %s): median %.4f ms, p10 %.4f ms, p90 %.4f ms over %d steps; %.1f tokens/s per row\n",
              info.backend != WEFT_BACKEND_GPU ? "step by step" : mode == "loop" ? "multi-step, one launch"
                                                 : mode == "resident" ? "resident, the host answering every step" : "one launch per step",
              info.backend == WEFT_BACKEND_GPU ? "GPU" : "CPU reference",
              median, percentile(step_ms, 0.1), percentile(step_ms, 0.9), steps, 1000.0 / median);

  if (arrivals.size() > 2) {
    // The last step's tokens are handed over after the kernel's end, so its gap is left out.
    std::vector<float> gaps;
    for (size_t j = 1; j + 1 < arrivals.size(); ++j)
      gaps.push_back(std::chrono::duration<float, std::milli>(arrivals[j] - arrivals[j - 1]).count());
    std::printf("gap between tokens as the host received them: median %.4f ms, p10 %.4f ms, p90 %.4f ms\n", percentile(gaps, 0.5),
                percentile(gaps, 0.1), percentile(gaps, 0.9));
  }
  if (!logits_path.empty()) {
    std::ofstream f(logits_path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!f) die("cannot write " + logits_path);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    std::string dev = info.device;
    dev.erase(std::remove(dev.begin(), dev.end(), '"'), dev.end());
    f << "{\"backend\": \"" << (info.backend == WEFT_BACKEND_GPU ? "gpu" : "reference") << "\", \"device\": \"" << dev << "\", \"mode\": \""
      << mode << "\", \"batch\": " << batch << ", \"prompt_len\": " << prompt_len << ", \"steps\": " << steps
      << ", \"compile_ms\": " << cr.total_ms << ", \"cache_hit\": " << cr.cache_hit << ", \"prefill_ms\": " << rep.prefill_ms
      << ", \"decode_ms\": " << rep.decode_ms << ", \"per_token_ms_median\": " << median << ", \"tokens\": [";
    for (int32_t b = 0; b < batch; ++b) {
      f << (b ? ", [" : "[");
      for (int32_t j = 0; j < steps; ++j) f << (j ? ", " : "") << tokens[static_cast<size_t>(b * steps + j)];
      f << "]";
    }
    f << "], \"step_ms\": [";
    for (int32_t j = 0; j < steps; ++j) f << (j ? ", " : "") << step_ms[static_cast<size_t>(j)];
    f << "]}\n";
    if (!f) die("cannot write " + json_path);
  }
  weft_model_destroy(model);
  weft_context_destroy(ctx);
  return 0;
}
