#include "lib/data/sentence_packer.h"

#include "lib/core/errors.h"
#include "lib/text/tokenizer.h"

namespace cabert::data {

SentencePacker::SentencePacker(int max_length, std::mt19937_64* rng, Emit emit)
    : budget_(max_length - 3), rng_(rng), emit_(std::move(emit)) {
  if (max_length < 8) throw UsageError(str("--max-length must be at least 8, got ", max_length));
}

void SentencePacker::add_sentence(const std::vector<int>& ids) {
  if (ids.empty()) return;
  if (!chunk_.empty() && chunk_tokens_ + static_cast<int>(ids.size()) > budget_) emit_chunk();
  if (chunk_.empty()) chunk_first_sentence_ = sentence_in_document_;
  if (static_cast<int>(ids.size()) > budget_) {
    chunk_.emplace_back(ids.begin(), ids.begin() + budget_);
    chunk_truncated_ += static_cast<uint32_t>(ids.size()) - budget_;
    ++truncated_sentences_;
  } else {
    chunk_.push_back(ids);
  }
  chunk_tokens_ += static_cast<int>(chunk_.back().size());
  ++sentence_in_document_;
  ++sentences_;
}

void SentencePacker::end_document() {
  emit_chunk();
  if (sentence_in_document_ > 0) ++document_;
  sentence_in_document_ = 0;
}

void SentencePacker::emit_chunk() {
  if (chunk_.empty()) return;
  using text::SpecialTokens;
  size_t split = chunk_.size();  // sentences in segment a
  if (chunk_.size() >= 2) {
    std::uniform_int_distribution<size_t> pick(1, chunk_.size() - 1);
    split = pick(*rng_);
  }
  pb::PretrainingExample example;
  example.add_token_ids(SpecialTokens::kCls);
  for (size_t s = 0; s < split; ++s) {
    for (int id : chunk_[s]) example.add_token_ids(id);
  }
  example.add_token_ids(SpecialTokens::kSep);
  example.set_segment_a_length(static_cast<uint32_t>(example.token_ids_size()));
  if (split < chunk_.size()) {
    for (size_t s = split; s < chunk_.size(); ++s) {
      for (int id : chunk_[s]) example.add_token_ids(id);
    }
    example.add_token_ids(SpecialTokens::kSep);
  }
  example.set_document(document_);
  example.set_first_sentence(chunk_first_sentence_);
  example.set_sentences_a(static_cast<uint32_t>(split));
  example.set_sentences_b(static_cast<uint32_t>(chunk_.size() - split));
  example.set_truncated_tokens(chunk_truncated_);
  chunk_.clear();
  chunk_tokens_ = 0;
  chunk_truncated_ = 0;
  emit_(std::move(example));
}

}  // namespace cabert::data
