#include "lib/train/update_guard.h"

#include <cmath>

#include "lib/core/errors.h"
#include "lib/core/log.h"

namespace cabert::train {

UpdateGuard::UpdateGuard(std::string job, std::string what, int64_t max_consecutive)
    : job_(std::move(job)), what_(std::move(what)), max_consecutive_(max_consecutive) {
  if (max_consecutive_ < 1) {
    throw UsageError(str("--max-skipped-updates: expected at least 1, got ", max_consecutive_));
  }
}

bool UpdateGuard::allow(double grad_norm, int64_t step) {
  if (std::isfinite(grad_norm)) {
    consecutive_ = 0;
    return true;
  }
  ++consecutive_;
  ++skipped_;
  if (consecutive_ >= max_consecutive_) {
    throw Error(str(job_, ": the gradient norm was ", grad_norm, " at ", what_, " ", step, ", ", consecutive_,
                    " ", what_, "s in a row; stopping (lower --lr, or look at the data of these ", what_, "s)"));
  }
  log_warning(job_, ": the gradient norm is ", grad_norm, " at ", what_, " ", step, "; skipping this update (",
              consecutive_, " in a row, the run stops at ", max_consecutive_, ")");
  return false;
}

void check_finite_weights(const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& job,
                          const std::string& where) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : named) {
    if (!tensor.is_floating_point()) continue;
    if (!torch::isfinite(tensor).all().item<bool>()) {
      throw Error(str(job, ": parameter ", name, " holds non-finite values ", where,
                      "; not saving a broken model (lower --lr; earlier checkpoints are kept)"));
    }
  }
}

}  // namespace cabert::train
