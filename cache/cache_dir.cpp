#include "cache/cache_dir.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace weft::cache {

namespace fs = std::filesystem;

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

constexpr const char* kElsewhere = "or set WEFT_CACHE_DIR to a private folder (WEFT_CACHE=off disables the cache)";

// The ownership and mode rules shared by the folder and the files in it.
void check_owner_and_mode(const fs::path& path, const struct stat& st, const char* what, const char* chmod_mode) {
  const uid_t me = geteuid();
  if (st.st_uid != me)
    fail(Status::cache, std::string("kernel cache ") + what + " " + path.string() + " is owned by uid " +
                            std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) +
                            "); weft will not load code another user can change. Fix: remove it or chown it to "
                            "yourself, " + kElsewhere);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    fail(Status::cache, std::string("kernel cache ") + what + " " + path.string() + " is writable by group or others (mode " +
                            octal_mode(st.st_mode) + "); weft will not load code another user can change. Fix: chmod " +
                            chmod_mode + " " + path.string() + ", " + kElsewhere);
}

}  // namespace

fs::path default_cache_dir() {
  if (const char* d = env("WEFT_CACHE_DIR")) return fs::absolute(d);
  if (const char* x = env("XDG_CACHE_HOME"); x && fs::path(x).is_absolute()) return fs::path(x) / "weft";
  const char* home = env("HOME");
  if (!home) {
    // getpwuid_r: the plain getpwuid's static buffer is not thread-safe.
    struct passwd pw{};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir && *found->pw_dir)
      return fs::path(found->pw_dir) / ".cache" / "weft";
    fail(Status::cache, "kernel cache: no home folder (HOME is unset and the password database has none); set "
                        "WEFT_CACHE_DIR to a private folder, or WEFT_CACHE=off");
  }
  return fs::path(home) / ".cache" / "weft";
}

bool cache_disabled_by_env() {
  const char* v = env("WEFT_CACHE");
  if (!v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "off" || s == "0" || s == "false" || s == "no";
}

fs::path prepare_private_dir(const fs::path& dir) {
  // mkdir -p by hand so every folder we create gets 0700 rather than the umask's default.
  fs::path target = fs::absolute(dir).lexically_normal();
  if (!target.has_filename() && target.has_parent_path()) target = target.parent_path();  // "a/b/" -> "a/b"
  fs::path partial;
  for (const fs::path& part : target) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      if (partial == target) ::chmod(partial.c_str(), 0700);  // exactly 0700 whatever the umask
    } else if (errno != EEXIST) {
      fail(Status::io, "kernel cache: cannot create folder " + partial.string() + ": " + std::strerror(errno) +
                           "; set WEFT_CACHE_DIR to a writable private folder, or WEFT_CACHE=off");
    }
  }
  // stat follows a link: what matters is who can write the folder the link leads to.
  struct stat st{};
  if (::stat(target.c_str(), &st) != 0)
    fail(Status::io, "kernel cache: cannot read folder " + target.string() + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    fail(Status::cache, "kernel cache folder " + target.string() + " is not a folder; " + kElsewhere);
  check_owner_and_mode(target, st, "folder", "700");
  return target;
}

void check_private_file(const fs::path& file) {
  struct stat st{};
  if (::lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail(Status::io, "kernel cache: cannot read " + file.string() + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    fail(Status::cache, "kernel cache file " + file.string() + " is not a regular file (a link or device?); remove it, " +
                            kElsewhere);
  check_owner_and_mode(file, st, "file", "600");
}

}  // namespace weft::cache
