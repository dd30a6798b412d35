// Fine-tuning an encoder-decoder on a classification task phrased as text-to-text (T5; Tay et al. 2021):
// inputs and verbalised labels from lib/tasks/text_to_text.h, the whole model trained with (optionally
// label-smoothed) cross-entropy on the target tokens, dev scored by generating and matching the label texts
// (lib/eval/text_to_text.h). Starts from a span-corruption (or any encoder-decoder) checkpoint, or from a
// preset's random initialisation: Tay's pre-trained and raw columns.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/eval/predict_split.h"
#include "lib/io/checkpoint_file.h"
#include "lib/tasks/task_inputs.h"
#include "lib/tasks/text_to_text.h"
#include "lib/text/tokenizer.h"
#include "lib/train/finetune_learner.h"

namespace cabert::train {

struct TextToTextSetup {
  pb::ModelConfig config;                // an encoder-decoder
  const io::Checkpoint* init = nullptr;  // all "model/" tensors start each run; nullptr: random
  tasks::TaskDefinition definition;
  tasks::Verbalizer verbalizer;
  const tasks::TaskData* train = nullptr;
  const text::Tokenizer* tokenizer = nullptr;
  eval::PredictOptions predict;  // max_length bounds the inputs
  double label_smoothing = 0;
  uint64_t max_train_examples = 0;  // 0 = all
  // Ablations of Tay et al.'s setup (issue 60): every run re-draws the decoder (its layers, final norm and
  // position bias; a shared token table stays the pre-trained one) after loading `init`; every target starts with
  // the first sentinel, as span corruption's targets do.
  bool reinit_decoder = false;
  bool target_sentinel_prefix = false;
};

std::unique_ptr<FinetuneLearner> make_text_to_text_learner(const TextToTextSetup& setup);

}  // namespace cabert::train
