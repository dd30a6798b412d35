#include "lib/text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <unordered_map>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/progress.h"

namespace cabert::text {
namespace {

const char* const kSpecialPieces[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

std::string sentinel_piece(int index) { return str("<extra_id_", index, ">"); }

// Feeds SentencePiece's trainer from our readers (BOM, CRLF, Gutenberg markers, stdin), skipping
// document boundaries.
class SentenceFeeder : public sentencepiece::SentenceIterator {
 public:
  SentenceFeeder(const TokenizerTrainOptions& options)
      : source_(options.inputs, options.input_format), progress_("tokenize train: reading", "bytes") {
    advance();
  }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return current_.text; }
  sentencepiece::util::Status status() const override { return {}; }
  uint64_t count() const { return count_; }
  void finish() { progress_.finish(str(count_, " sentences")); }

 private:
  void advance() {
    throw_if_interrupted();
    do {
      if (!source_.next(&current_)) {
        done_ = true;
        return;
      }
    } while (current_.document_end);
    ++count_;
    progress_.update(source_.bytes_read());
  }
  SentenceSource source_;
  Progress progress_;
  Sentence current_;
  bool done_ = false;
  uint64_t count_ = 0;
};

}  // namespace

std::string fnv1a64_hex(const std::string& bytes) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 1099511628211ULL;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

uint64_t train_tokenizer(const TokenizerTrainOptions& options) {
  if (options.model_prefix.empty()) throw UsageError("--model-prefix is required");
  if (options.model_type != "unigram" && options.model_type != "bpe") {
    throw UsageError(str("--model-type: expected unigram or bpe, got '", options.model_type, "'"));
  }
  // SentencePiece's own ranges, checked here so that a bad option is a usage error in cabert's words, not one
  // of SentencePiece's internal assertions after the input was read.
  if (options.num_sentinels < 0) throw UsageError(str("--sentinels: expected 0 or more, got ", options.num_sentinels));
  if (!(options.character_coverage >= 0.98 && options.character_coverage <= 1.0)) {
    throw UsageError(str("--character-coverage ", options.character_coverage,
                         ": expected a value in [0.98, 1] (SentencePiece's range)"));
  }
  if (options.max_sentences > 0 && options.max_sentences <= 100) {
    throw UsageError(str("--max-sentences ", options.max_sentences, ": expected 0 (all) or more than 100"));
  }
  int specials = 5 + options.num_sentinels;
  if (options.vocab_size <= specials + 10) {
    throw UsageError(
        str("--vocab-size ", options.vocab_size, " leaves no room next to the ", specials, " special tokens"));
  }
  std::string control = "[CLS],[SEP],[MASK]";
  for (int i = 0; i < options.num_sentinels; ++i) control.append(",").append(sentinel_piece(i));
  // As a map, not a command line: SentencePiece logs a command line (2 KB with 100 sentinels) whatever the log
  // level, since minloglevel is one of its arguments.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"pad_id", "0"},
      {"pad_piece", "[PAD]"},
      {"unk_id", "1"},
      {"unk_piece", "[UNK]"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"control_symbols", control},
      {"character_coverage", str(options.character_coverage)},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(std::max(options.threads, 1))},
      {"normalization_rule_name", options.lowercase ? "nmt_nfkc_cf" : "nmt_nfkc"},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"hard_vocab_limit", "false"},
      {"minloglevel", "2"}};
  // Sentence sampling and shuffling inside the trainer draw from SentencePiece's global generator.
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed & 0x7fffffff));
  SentenceFeeder feeder(options);
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &feeder, &model);
  feeder.finish();
  throw_if_interrupted();
  // Checked first: SentencePiece reports an empty input as an internal assertion.
  if (feeder.count() == 0) throw DataError("tokenize train: the inputs hold no text");
  if (!status.ok()) throw Error(str("SentencePiece training failed: ", status.ToString()));

  sentencepiece::SentencePieceProcessor processor;
  status = processor.LoadFromSerializedProto(model);
  if (!status.ok()) throw Error(str("SentencePiece produced an unreadable model: ", status.ToString()));
  std::ostringstream vocab;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    vocab << processor.IdToPiece(id) << '\t' << processor.GetScore(id) << '\n';
  }
  write_file_atomically(options.model_prefix + ".model", model);
  write_file_atomically(options.model_prefix + ".vocab", vocab.str());
  log_info("tokenize train: ", processor.GetPieceSize(), " pieces from ", feeder.count(), " sentences -> ",
           options.model_prefix, ".model");
  return feeder.count();
}

Tokenizer::Tokenizer(const std::string& model_path)
    : path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::string bytes = read_file(model_path);
  auto status = processor_->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    throw DataError(str(model_path, ": not a SentencePiece model (", status.ToString(), ")"));
  }
  for (int id = 0; id < 5; ++id) {
    if (id >= processor_->GetPieceSize() || processor_->IdToPiece(id) != kSpecialPieces[id]) {
      throw DataError(str(model_path, ": expected special token ", kSpecialPieces[id], " at id ", id,
                          "; train the tokenizer with `cabert tokenize train`"));
    }
  }
  while (SpecialTokens::kFirstSentinel + num_sentinels_ < processor_->GetPieceSize() &&
         processor_->IdToPiece(SpecialTokens::kFirstSentinel + num_sentinels_) == sentinel_piece(num_sentinels_)) {
    ++num_sentinels_;
  }
  checksum_ = fnv1a64_hex(bytes);
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  auto status = processor_->Encode(text, &ids);
  if (!status.ok()) throw Error(str("SentencePiece encode failed: ", status.ToString()));
  return ids;
}

void Tokenizer::check_id(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw DataError(str("token id ", id, " is outside the vocabulary of ", path_, " (size ", vocab_size(), ")"));
  }
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  for (int id : ids) check_id(id);
  std::string text;
  auto status = processor_->Decode(ids, &text);
  if (!status.ok()) throw Error(str("SentencePiece decode failed: ", status.ToString()));
  return text;
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::string Tokenizer::id_to_piece(int id) const {
  check_id(id);  // SentencePiece itself would read past its piece table
  return processor_->IdToPiece(id);
}

int Tokenizer::sentinel_id(int index) const {
  if (index < 0 || index >= num_sentinels_) {
    throw Error(str("sentinel ", index, " requested; ", path_, " has ", num_sentinels_));
  }
  return SpecialTokens::kFirstSentinel + index;
}

std::map<std::string, std::string> tokenizer_metadata(const Tokenizer& tokenizer) {
  return {{"tokenizer", std::filesystem::absolute(tokenizer.path()).lexically_normal().string()},
          {"tokenizer_checksum", tokenizer.checksum()},
          {"vocab_size", std::to_string(tokenizer.vocab_size())},
          {"sentinels", std::to_string(tokenizer.num_sentinels())}};
}

const std::vector<std::string>& tokenizer_metadata_keys() {
  static const std::vector<std::string> keys = {"tokenizer", "tokenizer_checksum", "vocab_size", "sentinels"};
  return keys;
}

}  // namespace cabert::text
