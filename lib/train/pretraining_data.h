// Pre-training input: a resumable stream over PretrainingExample shards (epoch after epoch, shards in
// order; the first `held_out` records of the first shard are kept apart for evaluation), batching with
// padding to the longest example of the batch, and the masking of both objectives drawn from a seeded
// std RNG (so that a resumed run draws the same masks).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "formats/corpus.pb.h"
#include "lib/io/record_file.h"

namespace cabert::train {

class ExampleStream {
 public:
  ExampleStream(std::vector<std::string> shards, uint64_t held_out);
  // Next training example (loops over the corpus forever; DataError when it holds no training example).
  pb::PretrainingExample next();
  const pb::DataPosition& position() const { return position_; }
  // Reopens the shard and skips to the recorded position.
  void seek(const pb::DataPosition& position);
  // The held-out examples (read from the first shard).
  std::vector<pb::PretrainingExample> held_out_examples() const;

 private:
  void open(uint32_t shard);
  std::vector<std::string> shards_;
  uint64_t held_out_;
  pb::DataPosition position_;
  std::unique_ptr<io::RecordReader> reader_;
  bool yielded_in_epoch_ = false;
};

struct Batch {
  torch::Tensor ids, segments, mask;  // int64 [B, T], int64 [B, T], bool [B, T]
  int64_t tokens = 0;                 // real tokens
};

// Pads to the longest example; segment ids from segment_a_length.
Batch make_batch(const std::vector<pb::PretrainingExample>& examples);

struct MaskingOptions {
  double select = 0.15;        // probability a regular token is selected
  double mask_token = 0.8;     // selected -> [MASK]
  double random_token = 0.1;   // selected -> random regular token (rest: kept)
  double max_fraction = 0;     // > 0: at most int(max_fraction * length) selections per sequence
  int64_t vocab_size = 0;
  int64_t first_regular_id = 5;  // ids below are special ([PAD] [UNK] [CLS] [SEP] [MASK] sentinels)
  int64_t mask_id = 4;
};

struct MaskedBatch {
  torch::Tensor input_ids;  // [B, T] after replacement
  torch::Tensor positions;  // bool [B, T]: selected tokens
  torch::Tensor labels;     // int64 [M]: original ids at the selected positions (row-major)
};

// Selects among real, non-special tokens (at least one per sequence that has any), then replaces.
MaskedBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& mask, const MaskingOptions& options,
                        std::mt19937_64& rng);

// Uniform double in [0, 1) from 53 random bits (same on every standard library).
double uniform01(std::mt19937_64& rng);

std::string rng_state(const std::mt19937_64& rng);
void set_rng_state(std::mt19937_64& rng, const std::string& state);

}  // namespace cabert::train
