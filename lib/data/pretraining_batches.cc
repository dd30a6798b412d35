#include "lib/data/pretraining_batches.h"

#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/log.h"

namespace cabert::data {

namespace {
constexpr const char* kExampleType = "cabert.pb.PretrainingExample";
}

ExampleStream::ExampleStream(std::vector<std::string> shards, uint64_t held_out)
    : shards_(std::move(shards)), held_out_(held_out) {
  if (shards_.empty()) throw UsageError("pretrain: expected at least one --corpus shard");
  open(0);
}

void ExampleStream::open(uint32_t shard) {
  reader_ = std::make_unique<io::RecordReader>(shards_.at(shard));
  reader_->expect(kExampleType);
  position_.set_shard(shard);
  position_.set_record(0);
}

pb::PretrainingExample ExampleStream::next() {
  pb::PretrainingExample example;
  for (;;) {
    if (reader_->next(&example)) {
      const uint64_t index = position_.record();
      position_.set_record(index + 1);
      if (position_.shard() == 0 && index < held_out_) continue;
      yielded_in_epoch_ = true;
      position_.set_examples_seen(position_.examples_seen() + 1);
      return example;
    }
    uint32_t next_shard = position_.shard() + 1;
    if (next_shard == shards_.size()) {
      if (!yielded_in_epoch_) {
        throw DataError(str(shards_[0], ": no training examples left after holding out ", held_out_,
                            " for evaluation (lower --eval-examples or give a larger corpus)"));
      }
      if (position_.epoch() == 0 && held_out_ > position_.examples_seen()) {
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
  open(position.shard());
  std::string skipped;
  for (uint64_t i = 0; i < position.record(); ++i) {
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
  while (examples.size() < held_out_ && reader.next(&example)) examples.push_back(example);
  return examples;
}

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
