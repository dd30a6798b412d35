// Fine-tuning an encoder with a task head (Chang et al.'s protocol): classification and regression heads on
// [CLS] (or the mean of the last layer, `pooling`), SQuAD start/end heads over the windows of squad_features; the encoder starts from a pre-training (or
// fine-tuned) checkpoint's "model/encoder." tensors, the head fresh.
#pragma once

#include <cstdint>
#include <memory>

#include "formats/model.pb.h"
#include "lib/eval/predict_split.h"
#include "lib/io/checkpoint_file.h"
#include "lib/models/task_model.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"
#include "lib/train/finetune_learner.h"

namespace cabert::train {

// `init` (nullptr: random) and `tokenizer` must outlive the learner. predict.max_length and predict.squad
// shape the training features too.
std::unique_ptr<FinetuneLearner> make_encoder_learner(const pb::ModelConfig& config, const io::Checkpoint* init,
                                                      const tasks::LoadedTask& task, const text::Tokenizer& tokenizer,
                                                      const eval::PredictOptions& predict, uint64_t max_train_examples,
                                                      models::Pooling pooling = models::Pooling::kCls);

}  // namespace cabert::train
