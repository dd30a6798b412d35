// Learning-rate schedules (linear warm-up then linear decay to 0 at the last step; inverse square root) and
// gradient clipping.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::train {

// Learning rate for update number `update` (1-based): peak * update / warmup during warm-up, then
// peak * (total - update) / (total - warmup), never below 0.
double linear_warmup_decay(double peak, int64_t update, int64_t warmup, int64_t total);

// Inverse square-root schedule (Vaswani et al.; fairseq's inverse_sqrt with warmup_init_lr 0): linear warm-up
// to `peak` over `warmup` updates, then peak * sqrt(warmup / update).
double inverse_sqrt(double peak, int64_t update, int64_t warmup);

// Scales the gradients so that their global L2 norm is at most max_norm (no-op for max_norm <= 0);
// returns the norm before clipping.
double clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace cabert::train
