// --tensorboard: the learned kernels `export --pictures` draws from a checkpoint (relative position terms,
// depthwise value kernels, lightweight convolution kernels; pictures/kernel_pictures.h), drawn from the model as it
// is and written as images "pictures/<name>" at `step`. pretrain calls it at each held-out evaluation, finetune and
// translation after each epoch.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "formats/model.pb.h"
#include "lib/io/tensorboard_metrics.h"

namespace cabert::train {

// `run`: finetune --runs N's run (its own event file); 0 otherwise.
void log_kernel_pictures(io::TensorboardLog& tensorboard, const pb::ModelConfig& config, torch::nn::Module& module,
                         int64_t step, uint32_t run = 0);

}  // namespace cabert::train
