#include "lib/core/files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
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
  fs::path target(path_);
  if (target.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
  }
  temp_path_ = (target.has_parent_path() ? target.parent_path() / "" : fs::path()).string() + "." +
               target.filename().string() + ".tmp." + std::to_string(getpid());
  file_ = std::make_unique<std::ofstream>(temp_path_, std::ios::binary | std::ios::trunc);
  if (!*file_) throw Error(str("cannot create output file ", temp_path_, ": ", std::strerror(errno)));
}

AtomicOutput::~AtomicOutput() {
  if (!committed_ && !temp_path_.empty()) {
    file_.reset();
    std::error_code ec;
    fs::remove(temp_path_, ec);
  }
}

std::ostream& AtomicOutput::stream() { return file_ ? static_cast<std::ostream&>(*file_) : std::cout; }

void AtomicOutput::commit() {
  if (committed_) return;
  stream().flush();
  if (!stream()) throw Error(str("error writing ", display_name(path_, true), " (disk full or pipe closed?)"));
  if (file_) {
    file_->close();
    if (file_->fail()) throw Error(str("error closing ", temp_path_));
    std::error_code ec;
    fs::rename(temp_path_, path_, ec);
    if (ec) throw Error(str("cannot rename ", temp_path_, " to ", path_, ": ", ec.message()));
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
      std::sort(inside.begin(), inside.end());
      result.insert(result.end(), inside.begin(), inside.end());
    } else {
      result.push_back(path);
    }
  }
  return result;
}

}  // namespace cabert
