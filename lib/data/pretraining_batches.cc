#include "lib/data/pretraining_batches.h"

#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/core/random.h"

namespace cabert::data {

namespace {
constexpr const char* kExampleType = "cabert.pb.PretrainingExample";

void check_example(const pb::PretrainingExample& example, int64_t vocab_size, int64_t max_tokens,
                   const std::string& shard, uint64_t record_index) {
  if (max_tokens > 0 && example.token_ids_size() > max_tokens) {
    throw DataError(str(shard, ": record ", record_index + 1, ": ", example.token_ids_size(),
                        " tokens, more than the model's max_length of ", max_tokens,
                        " (a corpus built with a larger --max-length: rebuild it with `cabert build-corpus "
                        "--max-length ",
                        max_tokens, "`, or give the model --set max_length=", example.token_ids_size(), " or more)"));
  }
  if (vocab_size <= 0) return;
  for (int32_t id : example.token_ids()) {
    if (id < 0 || id >= vocab_size) {
      throw DataError(str(shard, ": record ", record_index + 1, ": token id ", id, " is outside the model's ",
                          "vocabulary of ", vocab_size, " ids (a corpus built with another tokenizer?)"));
    }
  }
}
}  // namespace

ExampleStream::ExampleStream(std::vector<std::string> shards, uint64_t held_out, DataShare share)
    : shards_(std::move(shards)), held_out_(held_out), share_(share) {
  if (shards_.empty()) throw UsageError("pretrain: expected at least one --corpus shard");
  if (share_.world_size == 0 || share_.rank >= share_.world_size) {
    throw Error(str("internal: data share of rank ", share_.rank, " in a world of ", share_.world_size));
  }
  open(0);
}

void ExampleStream::open(uint32_t shard) {
  reader_ = std::make_unique<io::RecordReader>(shards_.at(shard));
  reader_->expect(kExampleType);
  if (share_.world_size > 1) {
    // Frame f is this rank's when (f + shard + offset + epoch) % W == rank.
    const uint64_t W = share_.world_size;
    const uint64_t shift = (shard + mix_seed(share_.seed, 0xd15c) % W + position_.epoch()) % W;
    reader_->select_frames(static_cast<uint32_t>((share_.rank + W - shift) % W), share_.world_size);
  }
  position_.set_shard(shard);
  position_.set_record(0);
}

pb::PretrainingExample ExampleStream::next(uint64_t* example_seed) {
  pb::PretrainingExample example;
  for (;;) {
    if (reader_->next(&example)) {
      const uint64_t index = reader_->last_record_index();
      position_.set_record(index + 1);
      if (position_.shard() == 0 && index < held_out_) continue;
      check_example(example, vocab_size_, max_tokens_, shards_[position_.shard()], index);
      yielded_in_epoch_ = true;
      position_.set_examples_seen(position_.examples_seen() + 1);
      if (example_seed != nullptr) {
        *example_seed = mix_seed(mix_seed(share_.seed, position_.epoch()), (uint64_t{position_.shard()} << 40) ^ index);
      }
      return example;
    }
    uint32_t next_shard = position_.shard() + 1;
    if (next_shard == shards_.size()) {
      // An empty share (fewer frames than ranks) would have this rank wait for an epoch that gives it
      // frames, reading what another rank reads meanwhile.
      if (!yielded_in_epoch_) {
        if (share_.world_size > 1) {
          throw DataError(str(shards_[0], ": rank ", share_.rank, " of ", share_.world_size,
                              " got no training examples: the corpus has too few frames for ", share_.world_size,
                              " ranks after holding out ", held_out_,
                              " (rebuild it with `cabert build-corpus "
                              "--frame-records N` for smaller frames, or use fewer processes)"));
        }
        throw DataError(str(shards_[0], ": no training examples left after holding out ", held_out_,
                            " for evaluation (lower --eval-examples or give a larger corpus)"));
      }
      if (position_.epoch() == 0 && held_out_ > position_.examples_seen() && share_.world_size == 1) {
        log_warning("pretrain: ", held_out_, " held-out examples but only ", position_.examples_seen(),
                    " for training per epoch; consider a smaller --eval-examples");
      }
      next_shard = 0;
      position_.set_epoch(position_.epoch() + 1);
      yielded_in_epoch_ = false;
    }
    open(next_shard);
  }
}

void ExampleStream::seek(const pb::DataPosition& position) {
  if (position.shard() >= shards_.size()) {
    throw UsageError(str("--resume: the checkpoint was reading shard ", position.shard() + 1, " but only ",
                         shards_.size(), " --corpus shard(s) were given"));
  }
  position_.set_epoch(position.epoch());
  open(position.shard());
  std::string skipped;
  while (position.record() > 0 &&
         (reader_->records_read() == 0 || reader_->last_record_index() + 1 < position.record())) {
    if (!reader_->next_bytes(&skipped)) {
      throw UsageError(str("--resume: ", shards_[position.shard()], " holds fewer than ", position.record(),
                           " records; is this the corpus of the checkpoint?"));
    }
  }
  position_ = position;
  yielded_in_epoch_ = true;
}

std::vector<pb::PretrainingExample> ExampleStream::held_out_examples() const {
  std::vector<pb::PretrainingExample> examples;
  io::RecordReader reader(shards_[0]);
  reader.expect(kExampleType);
  pb::PretrainingExample example;
  while (examples.size() < held_out_ && reader.next(&example)) {
    check_example(example, vocab_size_, max_tokens_, shards_[0], examples.size());
    examples.push_back(example);
  }
  return examples;
}

uint64_t ExampleStream::held_out_seed(uint64_t index) const { return mix_seed(share_.seed ^ 0xe7a1, index); }

Batch make_batch(const std::vector<pb::PretrainingExample>& examples) {
  const int64_t B = static_cast<int64_t>(examples.size());
  int64_t T = 1;
  for (const auto& e : examples) T = std::max<int64_t>(T, e.token_ids_size());
  Batch batch;
  batch.ids = torch::zeros({B, T}, torch::kInt64);
  batch.segments = torch::zeros({B, T}, torch::kInt64);
  batch.mask = torch::zeros({B, T}, torch::kBool);
  auto ids = batch.ids.accessor<int64_t, 2>();
  auto segments = batch.segments.accessor<int64_t, 2>();
  auto mask = batch.mask.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& e = examples[b];
    for (int64_t t = 0; t < e.token_ids_size(); ++t) {
      ids[b][t] = e.token_ids(t);
      segments[b][t] = t >= static_cast<int64_t>(e.segment_a_length()) ? 1 : 0;
      mask[b][t] = true;
    }
    batch.tokens += e.token_ids_size();
  }
  return batch;
}

}  // namespace cabert::data
