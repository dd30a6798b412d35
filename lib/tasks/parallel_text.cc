#include "lib/tasks/parallel_text.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>

#include "lib/core/errors.h"
#include "lib/tasks/task_data.h"
#include "lib/text/utf8.h"

namespace cabert::tasks {

namespace fs = std::filesystem;

namespace {

constexpr char kBom[] = "\xEF\xBB\xBF";

// What the first bytes of a file say it is. Only gzip and plain text can be read; other compressors get
// a message that names them instead of an "invalid UTF-8" on line 1.
std::string unreadable_compression(const unsigned char* magic, size_t size) {
  auto starts = [&](std::initializer_list<unsigned char> bytes) {
    return size >= bytes.size() && std::equal(bytes.begin(), bytes.end(), magic);
  };
  if (starts({'B', 'Z', 'h'})) return "bzip2";
  if (starts({0xFD, '7', 'z', 'X', 'Z', 0x00})) return "xz";
  if (starts({0x28, 0xB5, 0x2F, 0xFD})) return "zstd";
  if (starts({'P', 'K', 0x03, 0x04})) return "zip";
  return "";
}

// Line reader over a plain or gzip-compressed file, in fixed-size chunks, so memory stays bounded by
// max_line_bytes whatever the input. Lines come without '\n', one trailing '\r' and (on line 1) the BOM.
class LineSource {
 public:
  enum class Status { kLine, kTooLong, kEnd };

  LineSource(std::string path, uint64_t max_line_bytes) : path_(std::move(path)), max_(max_line_bytes) {
    std::error_code ec;
    if (fs::is_directory(path_, ec)) throw UsageError(str(path_, ": is a directory, expected a file"));
    std::FILE* probe = std::fopen(path_.c_str(), "rb");
    if (!probe) throw UsageError(str("cannot open input file ", path_, ": ", std::strerror(errno)));
    unsigned char magic[6] = {};
    size_t got = std::fread(magic, 1, sizeof(magic), probe);
    std::fclose(probe);
    std::string other = unreadable_compression(magic, got);
    if (!other.empty()) {
      throw DataError(str(path_, ": expected plain or gzip-compressed text, got a ", other, "-compressed file"));
    }
    // gzopen reads gzip data (magic 1f 8b) and passes anything else through unchanged.
    gz_ = gzopen(path_.c_str(), "rb");
    if (!gz_) throw UsageError(str("cannot open input file ", path_, ": ", std::strerror(errno)));
    gzbuffer(gz_, 1 << 17);
    buffer_.resize(1 << 16);
  }
  ~LineSource() {
    if (gz_) gzclose(gz_);
  }
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  const std::string& path() const { return path_; }
  // Lines returned so far (kLine and kTooLong), i.e. the number of the last one.
  uint64_t line_number() const { return line_number_; }

  // A final newline ends the last line; it does not start an empty one.
  Status next(std::string* line) {
    line->clear();
    bool any = false, too_long = false;
    while (true) {
      if (position_ == end_ && !refill()) {
        if (!any) return Status::kEnd;
        break;  // the last line has no newline
      }
      any = true;
      const char* start = buffer_.data() + position_;
      const char* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - position_));
      size_t length = newline ? static_cast<size_t>(newline - start) : end_ - position_;
      // One byte of slack for a '\r' that the check below strips.
      if (!too_long && line->size() + length > max_ + 1) {
        too_long = true;
        line->clear();
      }
      if (!too_long) line->append(start, length);
      position_ += length + (newline ? 1 : 0);
      if (newline) break;
    }
    ++line_number_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (too_long || line->size() > max_) {
      line->clear();
      return Status::kTooLong;
    }
    if (line_number_ == 1 && line->compare(0, 3, kBom) == 0) line->erase(0, 3);
    return Status::kLine;
  }

  // Counts the lines not read yet (to report both counts of misaligned files) without keeping them.
  uint64_t count_remaining() {
    uint64_t lines = 0;
    bool open_line = false;  // bytes seen after the last newline
    while (position_ < end_ || refill()) {
      const char* start = buffer_.data() + position_;
      lines += static_cast<uint64_t>(std::count(start, start + (end_ - position_), '\n'));
      open_line = buffer_[end_ - 1] != '\n';
      position_ = end_;
    }
    return lines + (open_line ? 1 : 0);
  }

 private:
  bool refill() {
    int got = gzread(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    int error = Z_OK;
    const char* message = gzerror(gz_, &error);
    if (got < 0 || (error != Z_OK && error != Z_STREAM_END)) {
      std::string detail = message ? message : "";
      if (detail.compare(0, path_.size() + 2, path_ + ": ") == 0) detail.erase(0, path_.size() + 2);
      throw DataError(str(path_, ": corrupt or truncated gzip data: ", detail));
    }
    position_ = 0;
    end_ = static_cast<size_t>(got);
    return got > 0;
  }

  std::string path_;
  uint64_t max_;
  gzFile gz_ = nullptr;
  std::vector<char> buffer_;
  size_t position_ = 0, end_ = 0;
  uint64_t line_number_ = 0;
};

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return std::strchr(" \t\r\n\v\f", c) && c != 0; });
}

std::string too_long_problem(uint64_t max_line_bytes) {
  return str("expected a line of at most ", max_line_bytes, " bytes, got a longer one");
}

// The problem with one side of an aligned pair, or "".
std::string line_problem(const LineSource& source, LineSource::Status status, const std::string& line,
                         uint64_t max_line_bytes) {
  std::string problem;
  if (status == LineSource::Status::kTooLong) {
    problem = too_long_problem(max_line_bytes);
  } else if (is_blank(line)) {
    problem = "expected a sentence, got a blank line";
  } else {
    problem = text::utf8_problem(line);
  }
  return problem.empty() ? "" : at_line(source.path(), source.line_number(), problem);
}

std::string lines(uint64_t count) { return str(count, count == 1 ? " line" : " lines"); }

// The problem with one TSV row, or "" (then `pair` holds it).
std::string tsv_row_problem(LineSource::Status status, const std::string& line, uint64_t max_line_bytes,
                            SentencePair* pair) {
  if (status == LineSource::Status::kTooLong) return too_long_problem(max_line_bytes);
  std::string problem = text::utf8_problem(line);
  if (!problem.empty()) return problem;
  std::vector<std::string> fields = split_tabs(line);
  if (fields.size() != 2) return str("expected 2 tab-separated fields, got ", fields.size());
  if (is_blank(fields[0])) return "expected a source sentence in field 1, got a blank field";
  if (is_blank(fields[1])) return "expected a target sentence in field 2, got a blank field";
  pair->source = std::move(fields[0]);
  pair->target = std::move(fields[1]);
  return "";
}

}  // namespace

ParallelData read_parallel_files(const std::string& source_path, const std::string& target_path,
                                 const ParallelReadOptions& options) {
  ParallelData data;
  data.source_path = source_path;
  data.target_path = target_path;
  LineSource source(source_path, options.max_line_bytes), target(target_path, options.max_line_bytes);
  std::string first_problem;  // held back until the line counts are known to agree
  SentencePair pair;
  while (first_problem.empty() && (options.max_pairs == 0 || data.pairs.size() < options.max_pairs)) {
    LineSource::Status source_status = source.next(&pair.source);
    LineSource::Status target_status = target.next(&pair.target);
    if (source_status == LineSource::Status::kEnd || target_status == LineSource::Status::kEnd) break;
    std::string problem = line_problem(source, source_status, pair.source, options.max_line_bytes);
    if (problem.empty()) problem = line_problem(target, target_status, pair.target, options.max_line_bytes);
    if (!problem.empty()) {
      if (options.skip_bad_rows) {
        ++data.skipped_rows;
      } else {
        first_problem = problem;
      }
      continue;
    }
    pair.line = source.line_number();
    data.pairs.push_back(std::move(pair));
    pair = SentencePair();
  }
  uint64_t source_lines = source.line_number() + source.count_remaining();
  uint64_t target_lines = target.line_number() + target.count_remaining();
  if (source_lines != target_lines) {
    throw DataError(str(source_path, " has ", lines(source_lines), " but ", target_path, " has ", target_lines,
                        "; expected line-aligned files"));
  }
  if (!first_problem.empty()) throw DataError(first_problem);
  return data;
}

ParallelData read_parallel_tsv(const std::string& path, const ParallelReadOptions& options) {
  ParallelData data;
  data.source_path = data.target_path = path;
  LineSource in(path, options.max_line_bytes);
  std::string line;
  if (options.header && in.next(&line) == LineSource::Status::kEnd) {
    throw DataError(str(path, ": empty file, expected a header row"));
  }
  while (options.max_pairs == 0 || data.pairs.size() < options.max_pairs) {
    LineSource::Status status = in.next(&line);
    if (status == LineSource::Status::kEnd) break;
    SentencePair pair;
    std::string problem = tsv_row_problem(status, line, options.max_line_bytes, &pair);
    if (!problem.empty()) {
      if (!options.skip_bad_rows) throw DataError(at_line(path, in.line_number(), problem));
      ++data.skipped_rows;
      continue;
    }
    pair.line = in.line_number();
    data.pairs.push_back(std::move(pair));
  }
  return data;
}

ParallelSplitFiles find_parallel_split(const std::string& dir, const std::string& split, const std::string& source_lang,
                                       const std::string& target_lang) {
  auto check_name = [](const char* what, const std::string& value) {
    if (value.empty() || value.find('/') != std::string::npos) {
      throw UsageError(str("expected a ", what, " name without '/', got '", value, "'"));
    }
  };
  check_name("split", split);
  check_name("source language", source_lang);
  check_name("target language", target_lang);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw UsageError(str(dir, ": no such directory, expected one holding ", split, ".", source_lang, "[.gz] and ",
                         split, ".", target_lang, "[.gz]"));
  }
  auto exists = [&](const fs::path& path) { return fs::is_regular_file(path, ec); };
  auto find = [&](const std::string& lang) -> std::string {
    fs::path plain = fs::path(dir) / (split + "." + lang), gz = fs::path(dir) / (split + "." + lang + ".gz");
    bool has_plain = exists(plain), has_gz = exists(gz);
    if (has_plain && has_gz) {
      throw UsageError(str("both ", plain.string(), " and ", gz.string(), " exist; expected one (they may differ)"));
    }
    if (has_plain) return plain.string();
    if (has_gz) return gz.string();
    return "";
  };
  ParallelSplitFiles files{find(source_lang), find(target_lang)};
  if (!files.source_path.empty() && !files.target_path.empty()) return files;

  // Name the splits that are there: a typo ("valid" for "val", "test" for "test_2016_flickr") is the
  // usual cause.
  std::set<std::string> splits;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
    std::string suffix = "." + source_lang;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string candidate = name.substr(0, name.size() - suffix.size());
      fs::path target = fs::path(dir) / (candidate + "." + target_lang);
      if (exists(target) || exists(target.string() + ".gz")) splits.insert(candidate);
    }
  }
  std::string available = "no split of that language pair is there";
  if (!splits.empty()) {
    available = "splits there:";
    for (const auto& name : splits) available += (available.back() == ':' ? " " : ", ") + name;
  }
  fs::path base = fs::path(dir) / split;
  throw UsageError(str("no ", split, " split for ", source_lang, "-", target_lang, " in ", dir, ": looked for ",
                       base.string(), ".", source_lang, "[.gz] and ", base.string(), ".", target_lang, "[.gz]; ",
                       available));
}

}  // namespace cabert::tasks
