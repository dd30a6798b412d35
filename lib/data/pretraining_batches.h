// Pre-training input: a resumable stream over PretrainingExample shards (epoch after epoch, shards in
// order; the first `held_out` records of the first shard are kept apart for evaluation) and batching with
// padding to the longest example of the batch. The masking of the objectives is in masking.h.
//
// Data parallelism: the ranks of a job read disjoint shares of the corpus by frames (the record container's
// unit, see lib/io/record_file.h). In epoch e, frame f of shard s belongs to rank
// (f + s + offset + e) mod world_size, offset drawn from the seed: the shares are disjoint, cover the
// corpus, rotate from epoch to epoch and are the same in every run with that seed. Every example also gets
// its own seed, mixed from the run's seed and where it lies (epoch, shard, record): its masks are the
// same whichever rank or batch reads it, so 2 ranks x batch B/2 draw what 1 rank x batch B draws.
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

struct DataShare {
  uint32_t rank = 0, world_size = 1;
  uint64_t seed = 42;
};

class ExampleStream {
 public:
  ExampleStream(std::vector<std::string> shards, uint64_t held_out, DataShare share = {});
  // Next training example of this rank's share (loops over the corpus forever; DataError when the share
  // holds no training example). `example_seed`, when given, receives the example's own seed.
  pb::PretrainingExample next(uint64_t* example_seed = nullptr);
  const pb::DataPosition& position() const { return position_; }
  // Reopens the shard and skips to the recorded position.
  void seek(const pb::DataPosition& position);
  // The held-out examples (read from the first shard), all of them whatever the rank.
  std::vector<pb::PretrainingExample> held_out_examples() const;
  // The seed of held-out example `index` (evaluation draws the same masks every time, on every rank).
  uint64_t held_out_seed(uint64_t index) const;
  // From now on every example read is checked: a token id outside [0, vocab_size) (the corpus of another
  // tokenizer) or more than max_tokens ids (a corpus built with a larger --max-length; 0: unchecked) is a
  // DataError naming the shard and the record, before it can reach an embedding on any device.
  void check_examples(int64_t vocab_size, int64_t max_tokens) {
    vocab_size_ = vocab_size;
    max_tokens_ = max_tokens;
  }

 private:
  void open(uint32_t shard);
  std::vector<std::string> shards_;
  uint64_t held_out_;
  DataShare share_;
  pb::DataPosition position_;
  std::unique_ptr<io::RecordReader> reader_;
  bool yielded_in_epoch_ = false;
  int64_t vocab_size_ = 0;  // 0: unchecked
  int64_t max_tokens_ = 0;  // 0: unchecked
};

struct Batch {
  torch::Tensor ids, segments, mask;  // int64 [B, T], int64 [B, T], bool [B, T]
  int64_t tokens = 0;                 // real tokens
  std::vector<uint64_t> row_seeds;    // each example's own seed (empty: the objective's generator draws)
};

// Pads to the longest example; segment ids from segment_a_length.
Batch make_batch(const std::vector<pb::PretrainingExample>& examples);

}  // namespace cabert::data
