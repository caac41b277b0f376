// Small decoder shapes for tests: the real Llama / Qwen3 graph structure at sizes that lower, simulate and run
// in milliseconds.
#pragma once

#include "models/decoder_graph.hpp"

namespace weft::test {

inline DecoderShape tiny_decoder(int64_t layers, int64_t max_batch, int64_t max_seq, bool qk_norm = true) {
  DecoderShape s = tiny_decoder_shape(qk_norm);
  s.layers = layers;
  s.vocab = 1000;
  s.max_seq = max_seq;
  s.max_batch = max_batch;
  return s;
}

}  // namespace weft::test
