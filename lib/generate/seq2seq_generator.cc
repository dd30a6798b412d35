#include "lib/generate/seq2seq_generator.h"

namespace cabert::generate {

Seq2SeqStepModel::Seq2SeqStepModel(models::Seq2SeqModel model, const torch::Tensor& source,
                                   const torch::Tensor& source_mask, int64_t rows_per_example)
    : model_(std::move(model)), device_(source.device()) {
  torch::Tensor memory = model_->encode(source, source_mask);
  torch::Tensor rows =
      torch::arange(source.size(0), source.options().dtype(torch::kInt64)).repeat_interleave(rows_per_example);
  state_ = model_->start_decoding(memory.index_select(0, rows), source_mask.index_select(0, rows));
}

torch::Tensor Seq2SeqStepModel::log_probs(const torch::Tensor& last_tokens, int64_t step) {
  return torch::log_softmax(model_->decode_step(last_tokens, step, state_).to(torch::kFloat), -1);
}

std::vector<Hypothesis> generate_batch(models::Seq2SeqModel& model, const torch::Tensor& source,
                                       const torch::Tensor& source_mask, const SearchOptions& options) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t batch = source.size(0);
  std::vector<Hypothesis> best;
  if (options.beam_size == 1) {
    Seq2SeqStepModel step_model(model, source, source_mask, 1);
    best = greedy_search(step_model, batch, options);
  } else {
    Seq2SeqStepModel step_model(model, source, source_mask, options.beam_size);
    for (auto& n_best : beam_search(step_model, batch, options)) {
      best.push_back(n_best.empty() ? Hypothesis{} : std::move(n_best.front()));
    }
  }
  model->train(was_training);
  return best;
}

}  // namespace cabert::generate
