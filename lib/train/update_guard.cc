#include "lib/train/update_guard.h"

#include <cmath>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/ops/device.h"

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
    throw Error(str(job_, ": the gradient norm was ", grad_norm, " at ", what_, " ", step, ", ", consecutive_, " ",
                    what_, "s in a row; stopping (lower --lr, or look at the data of these ", what_, "s)"));
  }
  log_warning(job_, ": the gradient norm is ", grad_norm, " at ", what_, " ", step, "; skipping this update (",
              consecutive_, " in a row, the run stops at ", max_consecutive_, ")");
  return false;
}

void check_finite_weights(const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& job,
                          const std::string& where) {
  torch::NoGradGuard no_grad;
  // One flag per floating-point tensor, read in one copy (a read per tensor waited on the device each time).
  std::vector<const std::string*> names;
  std::vector<torch::Tensor> finite;
  for (const auto& [name, tensor] : named) {
    if (!tensor.is_floating_point()) continue;
    names.push_back(&name);
    finite.push_back(torch::isfinite(tensor).all());
  }
  const std::vector<double> flags = ops::read_scalars(finite);
  for (size_t i = 0; i < names.size(); ++i) {
    if (flags[i] == 0) {
      throw Error(str(job, ": parameter ", *names[i], " holds non-finite values ", where,
                      "; not saving a broken model (lower --lr; earlier checkpoints are kept)"));
    }
  }
}

}  // namespace cabert::train
