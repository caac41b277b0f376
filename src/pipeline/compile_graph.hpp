// Graph -> cubin, through every stage: specialize (concrete symbol values), lower into tasks, plan memory,
// schedule, verify on the CPU simulator, generate the kernel source, compile + link, all behind the kernel
// cache (a hit skips lowering's output compile and returns the stored cubin and task tables).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "codegen/kernel_source.hpp"
#include "device/config.cuh"
#include "graph/graph.hpp"
#include "schedule/task_tables.hpp"

namespace weft {

struct CompileRequest {
  std::string arch = "sm_90a";
  int32_t num_sms = 0;           // 0: the usual SM count of the arch (108, 132, 148)
  SymbolValues symbols;          // empty: every symbol at its maximum
  uint64_t verify_seed = 1;      // the simulator's interleaving
  // The most parts an attention tile is split into over its timesteps (1: none; LowerOptions::attention_split).
  // 0: $WEFT_ATTENTION_SPLIT, else WEFT_ATTN_MAX_SPLIT. Outside 0..WEFT_ATTN_MAX_SPLIT: invalid_argument.
  int32_t attention_split = 0;
  // Tiles of two kv heads in attention (LowerOptions::attention_pairs): 0 $WEFT_ATTENTION_PAIRS (0: never, 1:
  // whatever the cache's length), else where every position fits; 1 whatever the cache's length; -1 never.
  int32_t attention_pairs = 0;
};

struct CompileResult {
  std::string key_hex;
  bool cache_hit = false;
  std::vector<uint8_t> cubin;
  std::string metadata;  // JSON: kernel name, block threads, shared memory, queues, events, arena bytes, ...
  TaskTables tables;
  int64_t num_tasks = 0, num_events = 0, arena_bytes = 0, num_queues = 0;
  bool tensor_cores = true;  // linked with the device library that has the tensor-core tiles (CompileOptions)
  std::string device_library;  // the device library it links (device_library_name: "sm_90a_simt", ...)
  int64_t tagged_tensors = 0;  // tensors handed over as tagged words (lower/tagged_handoffs.hpp)
  int32_t smem_bytes = WEFT_SMEM_BYTES_BASE;  // the kernel's dynamic shared memory: base, or wide (lower_for_device)
  // The kernel's entry and its threads per block: the generated one, or the weight loader's library's own
  // (WEFT_LOADER_KERNEL_NAME, WEFT_LOADER_LAUNCH_THREADS; its slot table is WEFT_LOADER_ENTRY_SLOTS long and it
  // takes the slot count after the symbols: device/loader_entry.cuh).
  std::string kernel_name = kMegakernelName;
  int32_t launch_threads = WEFT_LAUNCH_THREADS;
  double lower_ms = 0, compile_ms = 0, total_ms = 0;
  std::vector<int64_t> arena_offsets;  // per tensor; -1 outside the arena
};

// The compute capability of a target arch as one number (sm_90a: 90); Status::invalid_argument for others.
int32_t arch_sm(const std::string& arch);

// The usual SM count of an arch (what a plain compile targets when no device is at hand).
int32_t default_sm_count(const std::string& arch);

// Canonical text of the specialization (symbol name=value pairs), part of the cache key.
std::string specialization_text(const SymbolValues& values);

// The symbol values a specialization uses: `given` checked against each symbol's range, or every maximum
// when `given` is empty. Errors name the symbol.
SymbolValues resolve_symbols(const Graph& g, const SymbolValues& given);

// The most parts lowering splits an attention tile into over its timesteps: $WEFT_ATTENTION_SPLIT (1 to
// WEFT_ATTN_MAX_SPLIT; 1: none), else WEFT_ATTN_MAX_SPLIT. Status::invalid_argument naming the variable for
// another value. compile_graph puts it in the cache key.
int32_t attention_split_limit();
// $WEFT_SPLIT_K_PARTS, or 1 where unset: the fewest parts a plain tensor-core linear splits K into
// (LowerOptions::split_k_parts). Throws weft::Error (Status::invalid_argument) for a value that is not a power of two
// from 1 to WEFT_MMA_MAX_SPLIT.
int32_t split_k_parts_floor();
// LowerOptions::attention_pairs from $WEFT_ATTENTION_PAIRS: 0 gives -1 (never), 1 gives 1 (whatever the cache's
// length), unset 0 (where every position fits). Throws weft::Error (Status::invalid_argument) for another value.
int32_t attention_pairs_mode();
// LowerOptions::reserve_cap from $WEFT_RESERVED_SMS (0 to 1024), or -1 where unset (lowering's
// default). Throws weft::Error (Status::invalid_argument) naming the variable for another value.
int32_t reserve_cap_setting();

// `cache` may be null (no caching).
CompileResult compile_graph(const Graph& g, const CompileRequest& request, cache::KernelCache* cache);

}  // namespace weft
