// Greedy generation on a GPU: the model's weights uploaded once, one program (megakernel per batch size), KV
// caches and per-request buffers on the device. Step mode launches once per token with no host round trip
// between steps (inputs and outputs chain through device buffers); multi-step mode runs every generation step
// in one launch, the kernel feeding each argmax back as the next input.
#pragma once

#include <memory>

#include "models/generation.hpp"
#include "runtime/device_context.hpp"
#include "runtime/program.hpp"

namespace weft {

// Uploads the weights; compiles nothing yet (Generator::compile, or the first generate, does). Throws weft::Error
// (CUDA, OUT_OF_MEMORY).
std::unique_ptr<Generator> make_device_generator(std::shared_ptr<const Model> model, std::shared_ptr<DeviceContext> device,
                                                 const ProgramOptions& options);

}  // namespace weft
