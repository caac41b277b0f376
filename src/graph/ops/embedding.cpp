// embedding: rows of a [V, D] table gathered by integer ids.
#include "graph/op_def.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

TensorType infer_embedding(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank(0, 2);
  c.expect_int(1);
  TensorType out{c.in(0).dtype, c.shape(1)};
  out.shape.push_back(c.shape(0)[1]);
  return out;
}

// "[1, 2]": the multi-index of flat element k of `shape`, so an error points at the offending id.
std::string index_str(const std::vector<int64_t>& shape, int64_t k) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

void ref_embedding(const RefCtx& c) {
  const Buffer &table = c.in(0), &ids = c.in(1);
  Buffer& o = c.out();
  const int64_t v_dim = table.shape[0], d_dim = table.shape[1];
  for (int64_t k = 0; k < ids.numel(); ++k) {
    const int64_t id = ids.i[static_cast<size_t>(k)];
    if (id < 0 || id >= v_dim)
      c.fail("operand 'ids' at position " + index_str(ids.shape, k) + " is " + std::to_string(id) +
             "; expected an id in [0, " + std::to_string(v_dim) + ") (the table's row count V = " +
             std::to_string(v_dim) + ")");
    for (int64_t j = 0; j < d_dim; ++j)
      o.f[static_cast<size_t>(k * d_dim + j)] = table.f[static_cast<size_t>(id * d_dim + j)];
  }
}

}  // namespace

const OpDef& op_def_embedding() {
  static const OpDef d{"embedding", {{"table"}, {"ids"}}, false, {}, {}, infer_embedding, ref_embedding};
  return d;
}

}  // namespace weft
