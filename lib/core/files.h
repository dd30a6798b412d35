// Files and the '-' convention: "-" reads stdin / writes stdout. Outputs are written to a temporary file
// beside the destination and renamed on commit(), so an interrupted run never leaves a half-written file
// under the final name.
#pragma once

#include <cstdint>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace cabert {

bool is_stdio(const std::string& path);
// Name for messages: "<stdin>" / "<stdout>" for "-".
std::string display_name(const std::string& path, bool output = false);

// Opens a file (or stdin) for binary reading; throws UsageError naming the file when it cannot.
std::unique_ptr<std::istream> open_input(const std::string& path);
// Size in bytes, or 0 for stdin and anything that is not a regular file.
uint64_t file_size_or_zero(const std::string& path);
// Reads a whole file (or stdin).
std::string read_file(const std::string& path);

class AtomicOutput {
 public:
  explicit AtomicOutput(std::string path);
  ~AtomicOutput();  // removes the temporary file unless commit() succeeded
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  std::ostream& stream();
  const std::string& path() const { return path_; }
  // Flushes, checks for write errors (disk full, closed pipe) and renames into place.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  std::unique_ptr<std::ofstream> file_;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically.
void write_file_atomically(const std::string& path, const std::string& contents);

// Expands each argument that names a directory into the regular files it holds (sorted); keeps others.
std::vector<std::string> expand_inputs(const std::vector<std::string>& paths);

}  // namespace cabert
