#include "core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace weft {

namespace {
enum class Level { quiet, warn, debug };
Level level() {
  static const Level l = [] {
    const char* v = std::getenv("WEFT_LOG");
    if (!v) return Level::warn;
    if (std::strcmp(v, "quiet") == 0) return Level::quiet;
    if (std::strcmp(v, "debug") == 0) return Level::debug;
    return Level::warn;
  }();
  return l;
}
void emit(const char* tag, const std::string& message) {
  static std::mutex m;  // one line at a time from many threads
  std::lock_guard lock(m);
  std::fprintf(stderr, "weft: %s: %s\n", tag, message.c_str());
}
}  // namespace

void log_warning(const std::string& message) {
  if (level() != Level::quiet) emit("warning", message);
}
void log_debug(const std::string& message) {
  if (level() == Level::debug) emit("debug", message);
}

}  // namespace weft
