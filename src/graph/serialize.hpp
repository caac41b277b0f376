// Canonical JSON of a graph (stable across runs and processes), its structural XXH3-128 hash, and a
// readable text listing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/graph.hpp"

namespace weft {

inline constexpr int kGraphFormatVersion = 1;

// Canonical JSON: names included, keys sorted, ops in graph order. graph_from_json reads it back.
nlohmann::json graph_to_json(const Graph& g);
std::string graph_to_json_string(const Graph& g);

// Parses and validates; a malformed document is an error naming the field ("ops[2].inputs[1]: ...").
// Ops may appear in any order (they are placed in dependency order); a cycle is an error naming its ops.
Graph graph_from_json(const std::string& text);

// The graph with every name replaced by its position: what the hash covers.
nlohmann::json graph_structure(const Graph& g);

// XXH3-128 of graph_structure's canonical dump: {low 64 bits, high 64 bits}.
std::array<uint64_t, 2> graph_hash(const Graph& g);
std::string hash_hex(const std::array<uint64_t, 2>& h);

// Readable listing: symbols, bound tensors, ops with their result types, outputs.
std::string graph_to_text(const Graph& g);

}  // namespace weft
