#include "models/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace weft {

namespace {

// safetensors dtype names <-> weft dtypes; others (F64, U8, BOOL, F8_*) are not weft dtypes.
const std::pair<const char*, DType> kDTypes[] = {
    {"BF16", DType::bf16}, {"F16", DType::f16}, {"F32", DType::f32}, {"I32", DType::i32}, {"I64", DType::i64}};

const char* st_name(DType d) {
  for (const auto& [n, t] : kDTypes)
    if (t == d) return n;
  return "?";
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string where = "safetensors file '" + path.string() + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(Status::io, "cannot open " + where + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail(Status::io, "cannot stat " + where + ": " + std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    invalid(where + " is " + std::to_string(size_) + " bytes; expected at least the 8-byte header length");
  }
  map_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(Status::io, "cannot map " + where + ": " + std::strerror(errno));
  }
  const auto* bytes = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian u64
  if (header_len > size_ - 8 || header_len > (uint64_t{100} << 20))
    invalid(where + " declares a " + std::to_string(header_len) + "-byte header but holds " + std::to_string(size_) +
            " bytes; the file is truncated or not safetensors");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + 8 + header_len));
  } catch (const nlohmann::json::parse_error& e) {
    invalid(where + ": the header is not JSON: " + e.what());
  }
  if (!header.is_object()) invalid(where + ": the header is not a JSON object");
  const size_t data_start = 8 + header_len, data_size = size_ - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string t = "tensor '" + it.key() + "' in " + where;
    const nlohmann::json& v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      invalid(t + ": expected an object with dtype, shape and data_offsets");
    SafetensorEntry e;
    e.name = it.key();
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    const auto* known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const auto& p) { return dt == p.first; });
    if (known == std::end(kDTypes)) invalid(t + " has dtype '" + dt + "'; expected BF16, F16, F32, I32 or I64");
    e.dtype = known->second;
    int64_t numel = 1;
    if (!v["shape"].is_array()) invalid(t + ": shape is not an array");
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40))
        invalid(t + ": shape " + v["shape"].dump() + " holds a dim that is not a size");
      e.shape.push_back(d.get<int64_t>());
      numel *= std::max<int64_t>(e.shape.back(), 1);
      if (numel > (int64_t{1} << 48)) invalid(t + ": shape " + v["shape"].dump() + " is too large");
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      invalid(t + ": data_offsets must be two non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      invalid(t + ": data [" + std::to_string(begin) + ", " + std::to_string(end) + ") lies outside the " +
              std::to_string(data_size) + " data bytes of the file (truncated?)");
    e.bytes = static_cast<size_t>(end - begin);
    const int64_t elems = std::any_of(e.shape.begin(), e.shape.end(), [](int64_t d) { return d == 0; }) ? 0 : numel;
    if (e.bytes != static_cast<size_t>(elems) * dtype_size(e.dtype))
      invalid(t + ": " + std::to_string(e.bytes) + " data bytes for shape " + shape_str(e.shape) + " " + dt +
              "; expected " + std::to_string(static_cast<size_t>(elems) * dtype_size(e.dtype)));
    e.data = bytes + data_start + begin;
    index_[e.name] = tensors_.size();
    tensors_.push_back(std::move(e));
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const SafetensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  const auto single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  std::vector<std::filesystem::path> shards;
  if (std::filesystem::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception& e) {
      invalid("checkpoint index '" + index.string() + "' is not JSON: " + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      invalid("checkpoint index '" + index.string() + "' has no weight_map object");
    for (const auto& f : j["weight_map"]) {
      if (!f.is_string()) invalid("checkpoint index '" + index.string() + "': weight_map values must be file names");
      const auto p = dir / f.get<std::string>();
      if (f.get<std::string>().find('/') != std::string::npos)
        invalid("checkpoint index '" + index.string() + "' names shard '" + f.get<std::string>() + "' outside the folder");
      if (std::find(shards.begin(), shards.end(), p) == shards.end()) shards.push_back(p);
    }
  } else if (std::filesystem::exists(single)) {
    shards.push_back(single);
  } else {
    fail(Status::io, "checkpoint folder '" + dir.string() + "' has neither model.safetensors nor model.safetensors.index.json");
  }
  for (const auto& s : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(s));
    for (const SafetensorEntry& e : files_.back()->tensors())
      if (!by_name_.emplace(e.name, &e).second)
        invalid("tensor '" + e.name + "' appears in two shards of checkpoint '" + dir.string() + "'");
  }
}

const SafetensorEntry* Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const SafetensorEntry& Checkpoint::get(const std::string& name, DType dtype, const std::vector<int64_t>& shape) const {
  const SafetensorEntry* e = find(name);
  if (!e) invalid("checkpoint '" + dir_.string() + "' has no tensor '" + name + "'");
  if (e->dtype != dtype)
    invalid("checkpoint tensor '" + name + "' is " + st_name(e->dtype) + "; expected " + st_name(dtype));
  if (e->shape != shape)
    invalid("checkpoint tensor '" + name + "' has shape " + shape_str(e->shape) + "; expected " + shape_str(shape));
  return *e;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : by_name_) out.push_back(n);
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorToWrite>& tensors) {
  std::vector<const SafetensorToWrite*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto* t : sorted) {
    header[t->name] = {{"dtype", st_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';  // the format pads the header so that data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto* t : sorted) out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
  if (!out) fail(Status::io, "cannot write safetensors file '" + path.string() + "'");
}

}  // namespace weft
