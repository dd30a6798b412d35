// Files and the '-' convention: "-" reads stdin / writes stdout. Outputs are written to a temporary file
// beside the destination and renamed on commit(), so an interrupted run never leaves a half-written file
// under the final name; commit() syncs the file before the rename and the directory after it, so what a
// commit returned from survives a crash or a power loss. An existing device, FIFO or socket (/dev/null,
// /dev/stdout, a named pipe) is written in place instead; a symbolic link's file is replaced, the link kept.
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
  // Flushes, checks for write errors (disk full, closed pipe), syncs and renames into place.
  void commit();
  // Renames what is written so far into place now (synced as commit() does) and keeps the file open: later
  // writes land in the visible file (after flush()), and commit() then only flushes and syncs it. For files
  // read while they grow (metrics.cabert); a process killed after publish() leaves the file as far as written.
  void publish();
  // Hands what is written so far to the operating system (visible to readers, not synced).
  void flush();

 private:
  void rename_into_place();  // then syncs the directory

  std::string path_;
  std::string target_;  // path_, or the file a symbolic link at path_ names
  std::string temp_path_;
  std::unique_ptr<std::ofstream> file_;
  bool committed_ = false;
  bool published_ = false;
  bool in_place_ = false;  // path_ is a device, FIFO or socket: written directly, no temporary
};

// fsync of a file or a directory (Error naming it when the disk refuses).
void sync_path(const std::string& path, bool directory);

// Removes the temporary files (".NAME.tmp.PID") that AtomicOutput left in `dir` when its process was killed
// (their PID no longer runs); with `name`, only those of that output file. Returns how many.
size_t remove_stale_temporaries(const std::string& dir, const std::string& name = "");

// Creates the output directory `dir` (and its parents) that `option` names ("--model-dir"): a file in its place
// is a UsageError ("--model-dir runs/a: is a file, expected a directory"), any other failure an Error with the
// system's reason, instead of std::filesystem's raw message.
void create_output_directory(const std::string& dir, const std::string& option);

// Writes `contents` to `path` atomically.
void write_file_atomically(const std::string& path, const std::string& contents);

// Expands each argument that names a directory into the regular files it holds (sorted; UsageError when it
// holds none); keeps others.
std::vector<std::string> expand_inputs(const std::vector<std::string>& paths);

}  // namespace cabert
