#include "lib/train/text_to_text_learner.h"

#include <algorithm>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/data/seq2seq_batches.h"
#include "lib/eval/text_to_text.h"
#include "lib/models/seq2seq_model.h"
#include "lib/train/losses.h"

namespace cabert::train {
namespace {

class TextToTextLearner : public FinetuneLearner {
 public:
  static constexpr size_t kDiagnosedExamples = 256;

  explicit TextToTextLearner(const TextToTextSetup& setup) : setup_(setup) {
    if (!setup.config.has_seq2seq()) {
      throw UsageError(
          str("text-to-text fine-tuning needs an encoder-decoder; '", setup.config.name(), "' is an encoder"));
    }
    tasks::TextToTextStats stats;
    if (setup.target_sentinel_prefix && setup.tokenizer->num_sentinels() == 0) {
      throw UsageError(str("--target-sentinel-prefix: the tokenizer ", setup.tokenizer->path(),
                           " has no sentinels (train it with `tokenize train --sentinels N`)"));
    }
    examples_ = tasks::text_to_text_examples(*setup.train, setup.definition, setup.verbalizer, *setup.tokenizer,
                                             setup.predict.max_length, &stats,
                                             setup.target_sentinel_prefix ? setup.tokenizer->sentinel_id(0) : -1);
    if (setup.max_train_examples > 0 && examples_.size() > setup.max_train_examples) {
      examples_.resize(setup.max_train_examples);
    }
    if (stats.truncated_examples > 0) {
      log_info("finetune: ", stats.truncated_examples, " of ", stats.examples, " text-to-text inputs truncated to ",
               setup.predict.max_length, " tokens");
    }
    std::string labels;
    for (size_t i = 0; i < setup.verbalizer.texts.size(); ++i) {
      labels += str(labels.empty() ? "" : ", ", setup.definition.labels[i], " -> \"", setup.verbalizer.texts[i], "\"");
    }
    log_info("finetune: text-to-text, labels ", labels);
  }

  size_t examples() const override { return examples_.size(); }

  torch::nn::Module& start_run() override {
    model_ = models::Seq2SeqModel(setup_.config);
    if (setup_.init != nullptr) {
      size_t copied = io::restore_module(*model_, *setup_.init, "model/", "");
      log_debug("finetune: ", copied, " encoder-decoder tensors from ", setup_.init->path);
      if (setup_.reinit_decoder) reinit_decoder();
    }
    model_->to(setup_.predict.device);
    model_->train();
    return *model_;
  }

  torch::Tensor loss(const std::vector<size_t>& order, size_t begin, size_t end) override {
    std::vector<size_t> rows(order.begin() + static_cast<std::ptrdiff_t>(begin),
                             order.begin() + static_cast<std::ptrdiff_t>(end));
    data::Seq2SeqBatch batch = data::make_seq2seq_batch(examples_, rows);
    const torch::Device device = setup_.predict.device;
    torch::Tensor logits = model_->forward(batch.source.to(device), batch.source_mask.to(device),
                                           batch.target_in.to(device), batch.target_mask.to(device));
    SmoothedLoss loss = label_smoothed_cross_entropy(logits, batch.target_out.to(device), setup_.label_smoothing);
    return loss.loss / static_cast<double>(batch.target_tokens);
  }

  // The decoder's parameters (its layers, decoder_norm, decoder_position_bias, and a target table or output
  // projection of its own where the model has them) from a freshly initialised model, the rest kept as loaded.
  void reinit_decoder() {
    models::Seq2SeqModel fresh(setup_.config);
    torch::NoGradGuard no_grad;
    auto drawn = fresh->named_parameters();
    size_t redrawn = 0;
    for (auto& item : model_->named_parameters()) {
      const std::string& name = item.key();
      if (name.rfind("decoder", 0) != 0 && name.rfind("target_table.", 0) != 0 &&
          name.rfind("output_projection.", 0) != 0) {
        continue;
      }
      item.value().copy_(drawn[item.key()]);
      ++redrawn;
    }
    log_info("finetune: --reinit-decoder: ", redrawn, " decoder tensors drawn afresh, the encoder and the token table ",
             "kept from ", setup_.init->path);
  }

  int64_t tokens(const std::vector<size_t>& order, size_t begin, size_t end) const override {
    int64_t count = 0;
    for (size_t i = begin; i < end; ++i) {
      const data::Seq2SeqExample& example = examples_[order[i]];
      count += static_cast<int64_t>(example.source.size() + example.target.size() + 1);  // the target's EOS
    }
    return count;
  }

  eval::SplitPredictions evaluate(const tasks::TaskSplit& split) override {
    // Generation runs without gradients; predict_text_to_text restores training mode.
    return eval::predict_text_to_text(model_, setup_.definition, setup_.verbalizer, split, *setup_.tokenizer,
                                      setup_.predict);
  }

  // On the first kDiagnosedExamples training examples (file order, fixed across epochs and runs), in eval mode:
  // teacher-forced token accuracy (argmax = target at every real target position, EOS included), teacher-forced
  // exact match (every position right: the output greedy decoding would then produce), and the generated
  // accuracy and unmatched fraction that dev reports. Low training accuracy beside low dev accuracy reads as
  // under-fitting; a gap between teacher-forced and generated accuracy as exposure to its own outputs.
  eval::MetricMap training_diagnostics() override {
    const size_t count = std::min(kDiagnosedExamples, examples_.size());
    if (count == 0) return {};
    const bool was_training = model_->is_training();
    model_->eval();
    double right_tokens = 0, tokens = 0, exact = 0;
    {
      torch::NoGradGuard no_grad;
      const torch::Device device = setup_.predict.device;
      const size_t batch_size = static_cast<size_t>(std::max(setup_.predict.batch_size, 1));
      for (size_t begin = 0; begin < count; begin += batch_size) {
        std::vector<size_t> rows;
        for (size_t r = begin; r < std::min(count, begin + batch_size); ++r) rows.push_back(r);
        data::Seq2SeqBatch batch = data::make_seq2seq_batch(examples_, rows);
        torch::Tensor logits = model_->forward(batch.source.to(device), batch.source_mask.to(device),
                                               batch.target_in.to(device), batch.target_mask.to(device));
        torch::Tensor mask = batch.target_mask.to(device);
        torch::Tensor right = logits.argmax(-1).eq(batch.target_out.to(device)).logical_and(mask);
        right_tokens += right.sum().item<double>();
        tokens += static_cast<double>(batch.target_tokens);
        exact += right.sum(1).eq(mask.sum(1)).sum().item<double>();
      }
    }
    if (was_training) model_->train();
    tasks::TaskSplit train;
    train.path = setup_.train->path + " (the first " + std::to_string(count) + " training examples)";
    train.metrics_task = setup_.definition.name;
    train.data.path = setup_.train->path;
    train.data.examples.assign(setup_.train->examples.begin(),
                               setup_.train->examples.begin() + static_cast<std::ptrdiff_t>(count));
    const eval::SplitPredictions generated = eval::predict_text_to_text(
        model_, setup_.definition, setup_.verbalizer, train, *setup_.tokenizer, setup_.predict);
    return {{"train_teacher_forced_token_accuracy", right_tokens / std::max(tokens, 1.0)},
            {"train_teacher_forced_exact", exact / static_cast<double>(count)},
            {"train_generated_accuracy", generated.metrics.at("accuracy")},
            {"train_generated_unmatched", generated.metrics.at("unmatched")}};
  }

  void describe(pb::CheckpointInfo* info) const override {
    (*info->mutable_metadata())["text_to_text"] = "true";
    (*info->mutable_metadata())["label_texts"] = tasks::verbalizer_to_json(setup_.verbalizer);
    if (setup_.target_sentinel_prefix) (*info->mutable_metadata())["target_prefix"] = "<extra_id_0>";
    if (setup_.reinit_decoder) (*info->mutable_metadata())["reinit_decoder"] = "true";
  }

 private:
  TextToTextSetup setup_;
  std::vector<data::Seq2SeqExample> examples_;
  models::Seq2SeqModel model_{nullptr};
};

}  // namespace

std::unique_ptr<FinetuneLearner> make_text_to_text_learner(const TextToTextSetup& setup) {
  return std::make_unique<TextToTextLearner>(setup);
}

}  // namespace cabert::train
