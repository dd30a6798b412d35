// Pre-training input: a resumable stream over PretrainingExample shards (epoch after epoch, shards in
// order; the first `held_out` records of the first shard are kept apart for evaluation) and batching with
// padding to the longest example of the batch. The masking of the objectives is in masking.h.
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

namespace cabert::data {

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


}  // namespace cabert::data
