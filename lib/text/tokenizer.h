// SentencePiece tokenisation with the special tokens the models need, at fixed ids:
//   [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, sentinels <extra_id_0>..<extra_id_{S-1}> = 5..5+S-1
// (sentinels mark corrupted spans in T5-style span corruption). The ids are checked when a model loads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/text/text_source.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cabert::text {

struct SpecialTokens {
  static constexpr int kPad = 0;
  static constexpr int kUnk = 1;
  static constexpr int kCls = 2;
  static constexpr int kSep = 3;
  static constexpr int kMask = 4;
  static constexpr int kFirstSentinel = 5;
};

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // files or "-"
  TextFormat input_format = TextFormat::kLines;
  int vocab_size = 8000;
  std::string model_prefix;            // writes <prefix>.model and <prefix>.vocab
  std::string model_type = "unigram";  // or "bpe"
  bool lowercase = false;
  int num_sentinels = 100;
  // Characters outside the vocabulary become UTF-8 byte pieces instead of [UNK] (256 pieces of the vocabulary).
  bool byte_fallback = false;
  double character_coverage = 0.9999;
  uint64_t max_sentences = 2000000;  // sentences sampled for training
  uint64_t seed = 42;
  int threads = 1;
};

// Trains and writes <prefix>.model and <prefix>.vocab atomically. Returns the number of sentences read.
uint64_t train_tokenizer(const TokenizerTrainOptions& options);

class Tokenizer {
 public:
  // Loads a .model file; throws DataError when it is not a SentencePiece model or lacks the special tokens
  // at their ids.
  explicit Tokenizer(const std::string& model_path);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int> encode(const std::string& text) const;
  // Both throw DataError for an id outside the vocabulary.
  std::string decode(const std::vector<int>& ids) const;
  int vocab_size() const;
  std::string id_to_piece(int id) const;
  void check_id(int id) const;
  int num_sentinels() const { return num_sentinels_; }
  int sentinel_id(int index) const;
  const std::string& path() const { return path_; }
  // FNV-1a 64-bit hash of the model file, as 16 hex digits: ties data and checkpoints to this tokenizer.
  const std::string& checksum() const { return checksum_; }

 private:
  std::string path_, checksum_;
  int num_sentinels_ = 0;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

std::string fnv1a64_hex(const std::string& bytes);

// What a file of token ids records about the tokenizer that made them (tokenize encode, build-corpus): the
// model's absolute path (so a later command run from another directory still finds it), checksum, vocab_size and
// sentinels (the number of <extra_id_k>, which sets the first regular id even where the model file is gone).
std::map<std::string, std::string> tokenizer_metadata(const Tokenizer& tokenizer);
// Those keys, in the order they are written.
const std::vector<std::string>& tokenizer_metadata_keys();

}  // namespace cabert::text
