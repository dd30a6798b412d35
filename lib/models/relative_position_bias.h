// T5's relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
// Text-to-Text Transformer", section 2.1 "Model"): a learned scalar per head and relative-position bucket added to
// the attention logits, one table shared by every layer of a stack. Used by the T5-style Transformer of Tay et al.
// 2021's comparison (presets t5-*); the positions are then the only position signal (no absolute embeddings).
//
// Buckets of the offset r = j - i (key position minus query position), with B buckets and maximum distance D:
//   bidirectional (encoder): the sign takes half the buckets (r > 0 adds B/2), then |r| is bucketed in B' = B/2;
//   causal (decoder): only r <= 0 occurs, bucketed as -r in B' = B;
//   an offset m < B'/2 is its own bucket, a larger one goes to B'/2 + floor(log(m / (B'/2)) / log(D / (B'/2)) *
//   (B' - B'/2)), at most B' - 1 (so every m >= D shares the last bucket).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::models {

// The bucket of every offset in `offsets` (int64, any shape).
torch::Tensor t5_relative_buckets(const torch::Tensor& offsets, bool bidirectional, int64_t buckets,
                                  int64_t max_distance);

class RelativePositionBiasImpl : public torch::nn::Module {
 public:
  RelativePositionBiasImpl(int64_t heads, int64_t buckets, int64_t max_distance, bool bidirectional, double init_std);

  // The bias as a band over offsets -D..D, [heads, 2D + 1]: column r + D holds offset r's bucket. Every offset
  // beyond D has the bucket of +-D, so attention that clamps offsets to the radius D (ops::composite_attention's
  // relative beta) adds exactly T5's bias.
  torch::Tensor band() const;
  // The bias of queries first_query, ..., first_query + queries - 1 against keys 0, ..., keys - 1:
  // [1, heads, queries, keys].
  torch::Tensor between(int64_t first_query, int64_t queries, int64_t keys) const;
  int64_t max_distance() const { return max_distance_; }

  torch::Tensor table;  // [heads, buckets]

 private:
  // The bucket of every offset -D..D, computed once (every layer and decoding step reads it): on the CPU, and a
  // copy on the table's device once the table moves there.
  const torch::Tensor& band_buckets() const;

  int64_t buckets_, max_distance_;
  bool bidirectional_;
  torch::Tensor band_buckets_cpu_;
  mutable torch::Tensor band_buckets_;
};
TORCH_MODULE(RelativePositionBias);

}  // namespace cabert::models
