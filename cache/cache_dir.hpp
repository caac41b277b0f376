// Where the kernel cache lives, and the checks that keep it private: the cache holds machine code that
// weft loads and runs, so a folder or file that another user can write is a way to run code as us.
#pragma once

#include <filesystem>

namespace weft::cache {

// $WEFT_CACHE_DIR, else $XDG_CACHE_HOME/weft, else $HOME/.cache/weft (HOME from the environment, else the
// password database). Empty variables count as unset; a relative XDG_CACHE_HOME is ignored, as the XDG spec
// says. The result is absolute. Throws Status::cache when no home folder can be found.
std::filesystem::path default_cache_dir();

// True when WEFT_CACHE is "off" (or "0", "false", "no"; any case): no cache is opened at all.
bool cache_disabled_by_env();

// Creates `dir` and any missing parents (mode 0700; failure is Status::io), then refuses with Status::cache
// a `dir` that is not a directory, is owned by another user, or is writable by group or others. The
// message names the folder and the fix. Returns the folder as an absolute, normalized path.
std::filesystem::path prepare_private_dir(const std::filesystem::path& dir);

// Refuses with Status::cache an existing `file` that is not a regular file, is owned by another user or is
// writable by group or others. A file that does not exist passes.
void check_private_file(const std::filesystem::path& file);

}  // namespace weft::cache
