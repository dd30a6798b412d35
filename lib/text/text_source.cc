#include "lib/text/text_source.h"

#include <array>
#include <cctype>
#include <cstring>
#include <utility>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/text/utf8.h"

namespace cabert::text {

TextFormat parse_text_format(const std::string& name) {
  if (name == "lines") return TextFormat::kLines;
  if (name == "paragraphs") return TextFormat::kParagraphs;
  if (name == "gutenberg") return TextFormat::kGutenberg;
  throw UsageError(str("--input-format: expected lines, paragraphs or gutenberg, got '", name, "'"));
}

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

LineReader::LineReader(std::string name, std::unique_ptr<std::istream> in)
    : name_(std::move(name)), in_(std::move(in)) {}

LineReader::LineReader(const std::string& path) : LineReader(display_name(path), open_input(path)) {}

namespace {
size_t max_line_bytes_setting = size_t{1} << 20;
}  // namespace

void set_max_line_bytes(size_t bytes) { max_line_bytes_setting = bytes; }
size_t max_line_bytes() { return max_line_bytes_setting; }

bool LineReader::next(std::string* line) {
  line->clear();
  std::streambuf* buffer = in_->rdbuf();
  const size_t limit = max_line_bytes_setting + 1;  // + 1: a '\r' before the newline
  auto append = [&](const char* data, size_t size) {
    if (line->size() + size > limit) {
      throw DataError(
          at_line(name_, line_number_ + 1,
                  str("the line is longer than ", max_line_bytes_setting, " bytes (the bound is --max-line-bytes)")));
    }
    line->append(data, size);
  };
  char chunk[4096];
  size_t filled = 0;
  bool any = false;
  for (int c = buffer->sbumpc(); c != std::char_traits<char>::eof(); c = buffer->sbumpc()) {
    any = true;
    if (c == '\n') break;
    chunk[filled++] = static_cast<char>(c);
    if (filled == sizeof(chunk)) append(chunk, std::exchange(filled, 0));
  }
  append(chunk, filled);
  if (!any) return false;
  bytes_ += line->size() + 1;
  ++line_number_;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (line_number_ == 1 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
  return true;
}

bool LineReader::next_utf8(std::string* line) {
  if (!next(line)) return false;
  if (std::string problem = utf8_problem(*line); !problem.empty()) {
    throw DataError(at_line(name_, line_number_, problem));
  }
  return true;
}

namespace {

// "*** START OF ..." / "*** END OF ...", and the older ebooks' "***START OF ..." (e.g. #27942): three
// asterisks, any spaces, then the words.
bool is_gutenberg_marker(const std::string& line, const char* words) {
  if (line.compare(0, 3, "***") != 0) return false;
  const size_t start = line.find_first_not_of(' ', 3);
  return start != std::string::npos && line.compare(start, std::strlen(words), words) == 0;
}

bool is_abbreviation(const std::string& text, size_t period) {
  static const std::array<const char*, 16> kAbbreviations = {"Mr", "Mrs", "Ms",  "Dr",  "St", "Prof", "Sr",  "Jr",
                                                             "vs", "etc", "e.g", "i.e", "cf", "No",   "Vol", "Mt"};
  size_t begin = period;
  while (begin > 0 && !std::isspace(static_cast<unsigned char>(text[begin - 1]))) --begin;
  std::string word = text.substr(begin, period - begin);
  if (word.size() == 1 && std::isupper(static_cast<unsigned char>(word[0]))) return true;  // initials: "J. S. Mill"
  for (const char* abbreviation : kAbbreviations) {
    if (word == abbreviation) return true;
  }
  return false;
}

bool is_closing(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

// True when the UTF-8 sequence at `text[i]` is a closing curly quote (” or ’).
size_t closing_curly_quote_length(const std::string& text, size_t i) {
  if (text.compare(i, 3, "\xE2\x80\x9D") == 0 || text.compare(i, 3, "\xE2\x80\x99") == 0) return 3;
  return 0;
}

bool starts_sentence(const std::string& text, size_t i) {
  if (i >= text.size()) return false;
  auto c = static_cast<unsigned char>(text[i]);
  if (std::isupper(c) || std::isdigit(c) || c == '"' || c == '\'' || c == '(' || c == '[') return true;
  return text.compare(i, 3, "\xE2\x80\x9C") == 0 || text.compare(i, 3, "\xE2\x80\x98") == 0 || c >= 0xC3;
}

}  // namespace

std::vector<std::string> split_sentences(const std::string& paragraph) {
  std::vector<std::string> sentences;
  size_t start = 0;
  for (size_t i = 0; i < paragraph.size(); ++i) {
    char c = paragraph[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t end = i + 1;
    while (end < paragraph.size()) {
      if (is_closing(paragraph[end]) || paragraph[end] == '.' || paragraph[end] == '!' || paragraph[end] == '?') {
        ++end;
      } else if (size_t length = closing_curly_quote_length(paragraph, end)) {
        end += length;
      } else {
        break;
      }
    }
    if (end >= paragraph.size() || paragraph[end] != ' ') continue;
    size_t next = end;
    while (next < paragraph.size() && paragraph[next] == ' ') ++next;
    if (!starts_sentence(paragraph, next)) continue;
    if (c == '.' && is_abbreviation(paragraph, i)) continue;
    std::string sentence = trim(paragraph.substr(start, end - start));
    if (!sentence.empty()) sentences.push_back(std::move(sentence));
    start = next;
    i = next - 1;
  }
  std::string rest = trim(paragraph.substr(start));
  if (!rest.empty()) sentences.push_back(std::move(rest));
  return sentences;
}

SentenceSource::SentenceSource(std::vector<std::string> inputs, TextFormat format)
    : SentenceSource(nullptr, std::move(inputs), format) {}

SentenceSource::SentenceSource(std::unique_ptr<std::istream> first, std::vector<std::string> inputs, TextFormat format)
    : inputs_(std::move(inputs)), format_(format), first_(std::move(first)) {
  for (const auto& input : inputs_) total_bytes_ += file_size_or_zero(input);
}

uint64_t SentenceSource::bytes_read() const { return bytes_done_ + (reader_ ? reader_->bytes_read() : 0); }

bool SentenceSource::open_next() {
  if (reader_) bytes_done_ += reader_->bytes_read();
  reader_.reset();
  if (next_input_ >= inputs_.size()) return false;
  current_source_ = static_cast<uint32_t>(next_input_);
  const std::string& path = inputs_[next_input_++];
  if (current_source_ == 0 && first_) {
    reader_ = std::make_unique<LineReader>(display_name(path), std::move(first_));
  } else {
    reader_ = std::make_unique<LineReader>(path);
  }
  inside_gutenberg_body_ = false;
  seen_gutenberg_start_ = false;
  return true;
}

bool SentenceSource::fill() {
  queue_.clear();
  queue_position_ = 0;
  auto flush_paragraph = [this] {
    std::string paragraph = trim(paragraph_);
    paragraph_.clear();
    if (paragraph.empty()) return;
    for (auto& sentence : split_sentences(paragraph)) {
      queue_.push_back(Sentence{std::move(sentence), false, current_source_, paragraph_line_});
    }
  };
  auto end_document = [this] {
    if (!queue_.empty() || pending_boundary_) {
      queue_.push_back(Sentence{"", true, current_source_, reader_ ? reader_->line_number() : 0});
    }
    pending_boundary_ = false;
  };
  while (queue_.empty()) {
    if (!reader_ && !open_next()) return false;
    std::string line;
    if (!reader_->next_utf8(&line)) {
      if (format_ != TextFormat::kLines) flush_paragraph();
      if (format_ == TextFormat::kGutenberg && !seen_gutenberg_start_) {
        throw DataError(str(reader_->name(), ": no '*** START OF' marker found; is this a Project Gutenberg "
                                             "file? (use --input-format paragraphs for other prose)"));
      }
      end_document();
      open_next();
      if (!queue_.empty()) return true;
      if (!reader_) return false;
      continue;
    }
    if (format_ == TextFormat::kGutenberg) {
      if (is_gutenberg_marker(line, "START OF")) {
        inside_gutenberg_body_ = true;
        seen_gutenberg_start_ = true;
        continue;
      }
      if (is_gutenberg_marker(line, "END OF")) inside_gutenberg_body_ = false;
      if (!inside_gutenberg_body_) continue;
    }
    std::string trimmed = trim(line);
    if (format_ == TextFormat::kLines) {
      if (trimmed.empty()) {
        if (pending_boundary_) queue_.push_back(Sentence{"", true, current_source_, reader_->line_number()});
        pending_boundary_ = false;
      } else {
        queue_.push_back(Sentence{trimmed, false, current_source_, reader_->line_number()});
        pending_boundary_ = true;
      }
      continue;
    }
    if (trimmed.empty()) {
      flush_paragraph();
      if (!queue_.empty()) pending_boundary_ = true;
    } else {
      if (paragraph_.empty()) paragraph_line_ = reader_->line_number();
      paragraph_ += trimmed;
      paragraph_ += ' ';
    }
  }
  return true;
}

bool SentenceSource::next(Sentence* sentence) {
  if (queue_position_ >= queue_.size() && !fill()) return false;
  *sentence = std::move(queue_[queue_position_++]);
  return true;
}

}  // namespace cabert::text
