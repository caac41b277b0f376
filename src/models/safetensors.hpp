// Reading (and, for tests and samples, writing) Hugging Face checkpoints in the safetensors format: one file or
// shards listed by model.safetensors.index.json. Files are memory-mapped; every header field is checked, and a
// malformed, truncated or mismatched file is an error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/dtype.hpp"

namespace weft {

struct SafetensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside the mapping; valid while the file object lives
  size_t bytes = 0;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws weft::Error: Status::io when it cannot be read, Status::invalid_argument for
  // a malformed header, an unsupported dtype or data outside the file (naming the tensor).
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorEntry>& tensors() const { return tensors_; }
  const SafetensorEntry* find(const std::string& name) const;  // nullptr if absent

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<SafetensorEntry> tensors_;
  std::map<std::string, size_t> index_;
};

// A checkpoint folder: model.safetensors, or model.safetensors.index.json with its shards.
class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& dir);
  const std::filesystem::path& dir() const { return dir_; }
  const SafetensorEntry* find(const std::string& name) const;
  // The tensor, checked against the expected dtype and shape; errors name the tensor, the file and what differs.
  const SafetensorEntry& get(const std::string& name, DType dtype, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorEntry*> by_name_;
};

// One tensor to write: raw little-endian bytes of `dtype`.
struct SafetensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a safetensors file (header sorted by name, data 8-byte aligned as the format asks).
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorToWrite>& tensors);

}  // namespace weft
