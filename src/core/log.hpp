// Warnings and debug notes from weft to stderr. WEFT_LOG=quiet silences warnings; WEFT_LOG=debug adds notes.
#pragma once

#include <string>

namespace weft {

void log_warning(const std::string& message);
void log_debug(const std::string& message);

}  // namespace weft
