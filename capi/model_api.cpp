// C API: Hugging Face models and greedy generation.
#include <cstddef>
#include <cstdio>
#include <mutex>

#include "capi/api_common.hpp"
#include "models/device_generator.hpp"
#include "models/generation.hpp"
#include "runtime/driver.hpp"

using namespace weft;
using namespace weft::capi;

struct weft_model {
  std::shared_ptr<weft_context> context;
  std::shared_ptr<const Model> model;
  std::unique_ptr<Generator> generator;
  weft_backend backend = WEFT_BACKEND_REFERENCE;
  std::mutex mutex;  // one generation at a time
};

namespace {

weft_model* live_model(const weft_model* m) {
  if (!m) fail(Status::invalid_handle, "'model' is NULL; expected a model from weft_model_load");
  if (!is_live(m)) fail(Status::invalid_handle, "'model' is not a live model (destroyed or never created)");
  return const_cast<weft_model*>(m);
}

int32_t narrow(int64_t v) { return static_cast<int32_t>(v); }

}  // namespace

extern "C" {

weft_status weft_model_load(weft_context* context, const char* dir, const weft_model_options* options, weft_model** out) {
  return guard("weft_model_load", [&] {
    live_context(context, "context");
    const std::string path = require_str(dir, "dir");
    require_out(out, "out");
    const auto o = read_options(options, "weft_model_options");
    if (o.backend < WEFT_BACKEND_AUTO || o.backend > WEFT_BACKEND_REFERENCE)
      invalid("backend is " + std::to_string(static_cast<int>(o.backend)) + "; expected WEFT_BACKEND_AUTO, _GPU or _REFERENCE");
    if (o.max_batch < 0) invalid("max_batch is " + std::to_string(o.max_batch) + "; expected 0 (default 8) or more");
    if (o.watchdog_ms < 0) invalid("watchdog_ms is " + std::to_string(o.watchdog_ms) + "; expected 0 (default) or more");
    ModelOptions mo;
    mo.max_batch = o.max_batch > 0 ? o.max_batch : 8;
    mo.max_seq = o.max_seq;
    auto m = std::make_unique<weft_model>();
    m->context = context->shared_from_this();
    m->model = std::make_shared<const Model>(path, mo);
    std::string why;
    const bool gpu = o.backend == WEFT_BACKEND_GPU || (o.backend == WEFT_BACKEND_AUTO && cuda_available(&why));
    if (gpu) {
      ProgramOptions po;
      po.watchdog_ms = o.watchdog_ms;
      po.use_cache = o.disable_cache == 0;
      m->generator = make_device_generator(m->model, DeviceContext::open(o.device_ordinal), po);
      m->backend = WEFT_BACKEND_GPU;
    } else {
      m->generator = make_reference_generator(m->model, o.disable_cache == 0);
      m->backend = WEFT_BACKEND_REFERENCE;
    }
    register_handle(m.get());
    *out = m.release();
  });
}

void weft_model_destroy(weft_model* model) {
  if (!model || !unregister_handle(model)) return;
  delete model;
}

weft_status weft_model_get_info(const weft_model* model, weft_model_info* info) {
  return guard("weft_model_get_info", [&] {
    weft_model* m = live_model(model);
    require_out(info, "info");
    if (info->struct_size < sizeof(weft_model_info))
      invalid("info->struct_size is " + std::to_string(info->struct_size) + "; expected sizeof(weft_model_info)");
    const DecoderShape& s = m->model->shape();
    weft_model_info i{};
    i.struct_size = sizeof i;
    std::snprintf(i.model_type, sizeof i.model_type, "%s", s.name.c_str());
    i.layers = narrow(s.layers);
    i.hidden = narrow(s.hidden);
    i.q_heads = narrow(s.q_heads);
    i.kv_heads = narrow(s.kv_heads);
    i.head_dim = narrow(s.head_dim);
    i.ffn = narrow(s.ffn);
    i.vocab = narrow(s.vocab);
    i.max_batch = narrow(s.max_batch);
    i.max_seq = narrow(s.max_seq);
    i.backend = m->backend;
    std::snprintf(i.device, sizeof i.device, "%s", m->generator->device().c_str());
    for (const ModelWeight& w : m->model->weights().weights()) i.weight_bytes += static_cast<int64_t>(w.bytes);
    *info = i;
  });
}

weft_status weft_model_compile(weft_model* model, int32_t batch, weft_compile_report* report) {
  return guard("weft_model_compile", [&] {
    weft_model* m = live_model(model);
    if (report && report->struct_size < sizeof(weft_compile_report))
      invalid("report->struct_size is " + std::to_string(report->struct_size) + "; expected sizeof(weft_compile_report)");
    if (batch < 1 || batch > m->model->shape().max_batch)
      invalid("batch is " + std::to_string(batch) + "; expected 1.." + std::to_string(m->model->shape().max_batch) + " (the model's max_batch)");
    std::lock_guard lock(m->mutex);
    const CompileResult& r = m->generator->compile(batch);
    if (report) fill_compile_report(r, report);
  });
}

weft_status weft_model_generate(weft_model* model, const weft_generate_request* request, weft_generate_report* report) {
  return guard("weft_model_generate", [&] {
    weft_model* m = live_model(model);
    if (!request) invalid("'request' is NULL; expected a weft_generate_request");
    const auto q = read_options(request, "weft_generate_request");
    // Reports of callers built before steps_done end at decode_ms.
    constexpr size_t kReportV1 = offsetof(weft_generate_report, decode_ms) + sizeof(double);
    if (report && report->struct_size < kReportV1)
      invalid("report->struct_size is " + std::to_string(report->struct_size) + "; expected sizeof(weft_generate_report)");
    check_request_sizes(*m->model, q.batch, q.prompt_len, q.steps);  // before reading the caller's arrays
    if (!q.prompt_ids) invalid("prompt_ids is NULL; expected batch * prompt_len ids");
    if (!q.out_tokens) invalid("out_tokens is NULL; expected room for batch * steps ids");
    GenerateRequest r;
    r.batch = q.batch;
    r.prompt_len = q.prompt_len;
    r.steps = q.steps;
    r.prompt.assign(q.prompt_ids, q.prompt_ids + static_cast<int64_t>(q.batch) * q.prompt_len);
    if (q.forced_ids) r.forced.assign(q.forced_ids, q.forced_ids + static_cast<int64_t>(q.batch) * q.steps);
    r.multi_step = q.multi_step != 0;
    r.logits = q.out_logits;
    if (q.on_step) {
      auto* fn = q.on_step;
      void* user = q.on_step_user;
      r.on_step = [fn, user](int64_t step, const int32_t* tokens, int64_t batch) {
        return fn(user, static_cast<int32_t>(step), tokens, static_cast<int32_t>(batch)) == 0;
      };
    }
    std::lock_guard lock(m->mutex);
    const GenerateResult out = m->generator->generate(r);
    std::copy(out.tokens.begin(), out.tokens.end(), q.out_tokens);
    if (q.out_step_ms)
      for (size_t j = 0; j < static_cast<size_t>(q.steps); ++j)
        q.out_step_ms[j] = j < out.step_ms.size() ? static_cast<float>(out.step_ms[j]) : 0.0f;
    if (report) {
      report->prefill_ms = out.prefill_ms;
      report->decode_ms = out.decode_ms;
      if (report->struct_size >= offsetof(weft_generate_report, steps_done) + sizeof(int32_t))
        report->steps_done = static_cast<int32_t>(out.steps_done);
    }
  });
}

}  // extern "C"
