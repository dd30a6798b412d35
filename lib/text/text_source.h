// Reading raw text for tokenizer training and corpus building. Handles what real files bring: a UTF-8
// byte-order mark, CRLF line ends, a missing final newline, and (format "gutenberg") Project Gutenberg's
// licence header and footer around the `*** START OF` / `*** END OF` markers.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace cabert::text {

// lines:      one sentence per line, a blank line between documents (Chang et al.'s corpus layout);
// paragraphs: wrapped prose, paragraphs separated by blank lines, split into sentences; one file = one document;
// gutenberg:  paragraphs, keeping only the text between the START and END markers.
enum class TextFormat { kLines, kParagraphs, kGutenberg };
TextFormat parse_text_format(const std::string& name);

// The longest line any reader takes into memory (default 1 MiB; `cabert --max-line-bytes N`): a file
// without newlines is refused at that size instead of read whole.
void set_max_line_bytes(size_t bytes);
size_t max_line_bytes();

// Line reader over a file or stdin. Line numbers are 1-based.
class LineReader {
 public:
  LineReader(std::string name, std::unique_ptr<std::istream> in);
  explicit LineReader(const std::string& path);
  // False at the end of input. The line has no '\n' / '\r\n' and, on line 1, no BOM. A line longer than
  // max_line_bytes() is a DataError naming the file and the line.
  bool next(std::string* line);
  // next(), and a line that is not UTF-8 (a Latin-1 or binary file) a DataError "FILE:LINE: invalid UTF-8 at
  // byte column N ...": for raw text, which has no bad rows to skip and would become [UNK]s.
  bool next_utf8(std::string* line);
  uint64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }
  // Bytes consumed so far (for progress).
  uint64_t bytes_read() const { return bytes_; }

 private:
  std::string name_;
  std::unique_ptr<std::istream> in_;
  uint64_t line_number_ = 0, bytes_ = 0;
};

struct Sentence {
  std::string text;
  bool document_end = false;  // a boundary marker: no text
  uint32_t source = 0;        // index of the input file
  uint64_t line = 0;          // line the sentence starts on
};

// Streams sentences and document boundaries from several inputs; each input ends with a boundary.
class SentenceSource {
 public:
  SentenceSource(std::vector<std::string> inputs, TextFormat format);
  // Input 0 may be an already opened stream (stdin after sniffing).
  SentenceSource(std::unique_ptr<std::istream> first, std::vector<std::string> inputs, TextFormat format);
  bool next(Sentence* sentence);
  uint64_t bytes_read() const;
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  bool open_next();
  bool fill();  // reads input until at least one sentence/boundary is queued

  std::vector<std::string> inputs_;
  TextFormat format_;
  std::unique_ptr<std::istream> first_;
  std::unique_ptr<LineReader> reader_;
  size_t next_input_ = 0;
  uint32_t current_source_ = 0;
  bool inside_gutenberg_body_ = false, seen_gutenberg_start_ = false;
  std::vector<Sentence> queue_;
  size_t queue_position_ = 0;
  uint64_t bytes_done_ = 0, total_bytes_ = 0;
  std::string paragraph_;
  uint64_t paragraph_line_ = 0;
  bool pending_boundary_ = false;
};

// Rule-based sentence splitter for English prose: breaks after . ! ? (and closing quotes or brackets)
// followed by a space and an upper-case letter, digit or opening quote, except after common abbreviations.
std::vector<std::string> split_sentences(const std::string& paragraph);

// Trims ASCII whitespace at both ends.
std::string trim(const std::string& text);

}  // namespace cabert::text
