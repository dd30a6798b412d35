// Generation with an encoder-decoder (lib/models/seq2seq_model.h): the StepModel that search.h drives, and
// one call that turns a batch of source ids into the best hypothesis of every example.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "lib/generate/search.h"
#include "lib/models/seq2seq_model.h"

namespace cabert::generate {

class Seq2SeqStepModel : public StepModel {
 public:
  // Encodes source [B, S] (mask [B, S]) once and keeps rows_per_example copies of every example's decoder
  // state (the beam size; 1 for greedy), example-major as the search expects.
  Seq2SeqStepModel(models::Seq2SeqModel model, const torch::Tensor& source, const torch::Tensor& source_mask,
                   int64_t rows_per_example);
  torch::Device device() const override { return device_; }
  torch::Tensor log_probs(const torch::Tensor& last_tokens, int64_t step) override;
  void reorder(const torch::Tensor& rows) override { state_.reorder(rows); }

 private:
  models::Seq2SeqModel model_;
  models::DecoderState state_;
  torch::Device device_;
};

// The best hypothesis of every example of the batch: greedy search when beam_size is 1, else beam search
// (options as in search.h). Runs without gradients and in eval mode; restores the model's training mode.
std::vector<Hypothesis> generate_batch(models::Seq2SeqModel& model, const torch::Tensor& source,
                                       const torch::Tensor& source_mask, const SearchOptions& options);

}  // namespace cabert::generate
