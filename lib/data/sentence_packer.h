// Packs consecutive sentences of a document into pre-training examples the way Chang et al. built their
// corpus: greedy chunks of whole sentences up to max_length - 3 tokens, split at a random sentence boundary
// into `[CLS] a [SEP] b [SEP]` (no next-sentence objective, so b always follows a). A chunk of one sentence
// becomes `[CLS] a [SEP]`; a sentence longer than the budget is truncated (counted in truncated_tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "formats/corpus.pb.h"

namespace cabert::data {

class SentencePacker {
 public:
  using Emit = std::function<void(pb::PretrainingExample&&)>;

  SentencePacker(int max_length, std::mt19937_64* rng, Emit emit);
  void add_sentence(const std::vector<int>& ids);
  // Emits the last chunk of the current document; the next sentence starts a new document.
  void end_document();

  uint64_t documents() const { return document_; }
  uint64_t sentences() const { return sentences_; }
  uint64_t truncated_sentences() const { return truncated_sentences_; }

 private:
  void emit_chunk();

  int budget_;
  std::mt19937_64* rng_;
  Emit emit_;
  std::vector<std::vector<int>> chunk_;
  int chunk_tokens_ = 0;
  uint32_t chunk_truncated_ = 0;
  uint32_t sentence_in_document_ = 0, chunk_first_sentence_ = 0;
  uint64_t document_ = 0, sentences_ = 0, truncated_sentences_ = 0;
};

}  // namespace cabert::data
