#include "lib/train/text_to_text_learner.h"

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
  explicit TextToTextLearner(const TextToTextSetup& setup) : setup_(setup) {
    if (!setup.config.has_seq2seq()) {
      throw UsageError(
          str("text-to-text fine-tuning needs an encoder-decoder; '", setup.config.name(), "' is an encoder"));
    }
    tasks::TextToTextStats stats;
    examples_ = tasks::text_to_text_examples(*setup.train, setup.definition, setup.verbalizer, *setup.tokenizer,
                                             setup.predict.max_length, &stats);
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

  eval::SplitPredictions evaluate(const tasks::TaskSplit& split) override {
    // Generation runs without gradients; predict_text_to_text restores training mode.
    return eval::predict_text_to_text(model_, setup_.definition, setup_.verbalizer, split, *setup_.tokenizer,
                                      setup_.predict);
  }

  void describe(pb::CheckpointInfo* info) const override {
    (*info->mutable_metadata())["text_to_text"] = "true";
    (*info->mutable_metadata())["label_texts"] = tasks::verbalizer_to_json(setup_.verbalizer);
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
