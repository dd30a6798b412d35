// A fine-tuned checkpoint (from `cabert finetune`) turned back into a model ready to predict: its config,
// task definition, reading options and SQuAD settings, restored from the file. Used by `evaluate` (and by
// `finetune --init-from-task`), so that reading a model never depends on the training code.
#pragma once

#include <torch/torch.h>

#include <string>

#include "formats/checkpoint.pb.h"
#include "lib/models/task_model.h"
#include "lib/tasks/squad_features.h"
#include "lib/tasks/task_inputs.h"

namespace cabert::eval {

struct LoadedTaskModel {
  models::TaskModel model{nullptr};
  tasks::TaskDefinition definition;
  tasks::TaskSource source;  // table options the model was trained with
  pb::CheckpointInfo info;
  int max_length = 128;
  tasks::SquadOptions squad;
};

// Throws DataError for a checkpoint that is not a fine-tuned one (e.g. a pre-training checkpoint).
LoadedTaskModel load_task_model(const std::string& path, torch::Device device);

}  // namespace cabert::eval
