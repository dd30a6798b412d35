#include "lib/core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>

#include "lib/core/errors.h"

namespace cabert {
namespace fs = std::filesystem;

bool is_stdio(const std::string& path) { return path == "-"; }

std::string display_name(const std::string& path, bool output) {
  if (!is_stdio(path)) return path;
  return output ? "<stdout>" : "<stdin>";
}

std::unique_ptr<std::istream> open_input(const std::string& path) {
  if (is_stdio(path)) {
    // Non-owning: std::cin outlives every reader.
    return std::unique_ptr<std::istream>(new std::istream(std::cin.rdbuf()));
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(str(path, ": is a directory, expected a file"));
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*file) throw UsageError(str("cannot open input file ", path, ": ", std::strerror(errno)));
  return file;
}

uint64_t file_size_or_zero(const std::string& path) {
  if (is_stdio(path)) return 0;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return 0;
  auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

std::string read_file(const std::string& path) {
  auto in = open_input(path);
  std::ostringstream buffer;
  buffer << in->rdbuf();
  if (in->bad()) throw Error(str("error reading ", display_name(path)));
  return buffer.str();
}

AtomicOutput::AtomicOutput(std::string path) : path_(std::move(path)) {
  if (is_stdio(path_)) return;
  std::error_code ec;
  const fs::file_status existing = fs::status(path_, ec);  // through symbolic links
  if (fs::is_directory(existing) || (!path_.empty() && path_.back() == '/')) {
    throw UsageError(str(path_, ": ", fs::is_directory(existing) ? "is a directory" : "ends in '/'",
                         ", expected the path of an output file"));
  }
  if (fs::exists(existing) && !fs::is_regular_file(existing)) {
    // A device (/dev/null), a FIFO, a socket, /dev/stdout: written in place, as a shell redirection writes it.
    // Renaming a temporary over it would replace the node with a regular file (as root, /dev/null itself).
    file_ = std::make_unique<std::ofstream>(path_, std::ios::binary | std::ios::trunc);
    if (!*file_) throw Error(str("cannot open output ", path_, ": ", std::strerror(errno)));
    in_place_ = true;
    return;
  }
  // A symbolic link to a file: the file it names is replaced, the link stays.
  fs::path target = fs::is_symlink(path_, ec) ? fs::weakly_canonical(path_, ec) : fs::path(path_);
  if (ec) target = path_;
  target_ = target.string();
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  // What a killed writer of this same output left (its PID no longer runs).
  remove_stale_temporaries(target.has_parent_path() ? target.parent_path().string() : ".", target.filename().string());
  temp_path_ = (target.has_parent_path() ? target.parent_path() / "" : fs::path()).string() + "." +
               target.filename().string() + ".tmp." + std::to_string(getpid());
  file_ = std::make_unique<std::ofstream>(temp_path_, std::ios::binary | std::ios::trunc);
  if (!*file_) throw Error(str("cannot create output file ", temp_path_, ": ", std::strerror(errno)));
}

void sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw Error(str("cannot open ", path, " to sync it: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  // Some filesystems cannot sync a directory (EINVAL); the file itself is synced either way.
  if (rc != 0 && !(directory && saved == EINVAL)) {
    throw Error(str("cannot sync ", path, " to disk: ", std::strerror(saved)));
  }
}

size_t remove_stale_temporaries(const std::string& dir, const std::string& only) {
  static const std::regex pattern("\\.(.+)\\.tmp\\.([0-9]+)");
  size_t removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!only.empty() && name.compare(0, only.size() + 6, "." + only + ".tmp.") != 0) continue;  // cheap first
    if (!std::regex_match(name, match, pattern) || (!only.empty() && match[1] != only)) continue;
    const pid_t writer = static_cast<pid_t>(std::stol(match[2]));
    if (writer == getpid() || ::kill(writer, 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

void create_output_directory(const std::string& dir, const std::string& option) {
  std::error_code ec;
  const fs::file_status existing = fs::status(dir, ec);
  if (fs::exists(existing) && !fs::is_directory(existing)) {
    throw UsageError(str(option, " ", dir, ": is a file, expected a directory"));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    // A file where a parent directory should be is the user's to fix too.
    for (fs::path parent = fs::path(dir).parent_path(); !parent.empty(); parent = parent.parent_path()) {
      std::error_code ignored;
      if (fs::exists(parent, ignored) && !fs::is_directory(parent, ignored)) {
        throw UsageError(str(option, " ", dir, ": ", parent.string(), " is a file, expected a directory"));
      }
      if (parent == parent.parent_path()) break;
    }
    throw Error(str(option, " ", dir, ": cannot create the directory: ", ec.message()));
  }
}

AtomicOutput::~AtomicOutput() {
  if (!committed_ && !published_ && !temp_path_.empty()) {
    file_.reset();
    std::error_code ec;
    fs::remove(temp_path_, ec);
  }
}

std::ostream& AtomicOutput::stream() { return file_ ? static_cast<std::ostream&>(*file_) : std::cout; }

void AtomicOutput::flush() {
  stream().flush();
  if (!stream()) throw Error(str("error writing ", display_name(path_, true), " (disk full or pipe closed?)"));
}

void AtomicOutput::rename_into_place() {
  std::error_code ec;
  fs::rename(temp_path_, target_, ec);
  if (ec) throw Error(str("cannot rename ", temp_path_, " to ", target_, ": ", ec.message()));
  const fs::path parent = fs::path(target_).parent_path();
  sync_path(parent.empty() ? "." : parent.string(), true);
}

void AtomicOutput::publish() {
  if (committed_ || published_) return;
  flush();
  if (file_ && !in_place_) {
    sync_path(temp_path_, false);
    rename_into_place();
  }
  published_ = true;
}

void AtomicOutput::commit() {
  if (committed_) return;
  flush();
  if (file_) {
    file_->close();
    const std::string& written = in_place_ ? path_ : published_ ? target_ : temp_path_;
    if (file_->fail()) throw Error(str("error closing ", written));
    if (in_place_) {  // a device or a pipe: nothing to sync or rename
      committed_ = true;
      return;
    }
    // Durable before it is visible: the data reaches the disk, then the rename, then the directory entry.
    sync_path(written, false);
    if (!published_) rename_into_place();
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicOutput out(path);
  out.stream().write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.commit();
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& paths) {
  std::vector<std::string> result;
  for (const auto& path : paths) {
    std::error_code ec;
    if (!is_stdio(path) && fs::is_directory(path, ec)) {
      std::vector<std::string> inside;
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file()) inside.push_back(entry.path().string());
      }
      if (inside.empty()) throw UsageError(str(path, ": the directory holds no files, expected input files in it"));
      std::sort(inside.begin(), inside.end());
      result.insert(result.end(), inside.begin(), inside.end());
    } else {
      result.push_back(path);
    }
  }
  return result;
}

}  // namespace cabert
