// Builds with C++17: the wrapper must not need C++20.
#include <cstdio>
#include "weft/weft.hpp"
int main() {
  weft::Context ctx;
  weft::Graph g(ctx, "consumer");
  auto x = g.input("x", WEFT_DTYPE_F32, {4});
  g.output(g.silu(x, "y"));
  std::printf("consumer_cpp: %zu bytes of JSON\n", g.json().size());
  return 0;
}
