// The last check before an optimizer update. A finite loss can still give a non-finite gradient (an overflow
// in the backward pass, a bf16 product out of range): that update is skipped with a warning, as mixed-precision
// trainers do, and the run stops after `max_consecutive` skips in a row, naming the step. Before a checkpoint
// is written, the weights are checked too, so a saved model never holds NaN or infinity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace cabert::train {

class UpdateGuard {
 public:
  // `job` prefixes the messages ("pretrain", "finetune"); `what` names the update ("step", "update").
  UpdateGuard(std::string job, std::string what, int64_t max_consecutive);
  // True when the optimizer may step with gradients of this global norm (computed after the gradient
  // all-reduce, so every rank decides alike). Throws Error after max_consecutive non-finite norms in a row.
  bool allow(double grad_norm, int64_t step);
  int64_t skipped() const { return skipped_; }

 private:
  std::string job_, what_;
  int64_t max_consecutive_, consecutive_ = 0, skipped_ = 0;
};

// Throws Error "JOB: parameter NAME holds non-finite values at STEP; not saving ..." when any tensor of
// `named` is not all finite.
void check_finite_weights(const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& job,
                          const std::string& where);

}  // namespace cabert::train
