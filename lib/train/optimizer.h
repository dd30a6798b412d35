// AdamW (decoupled weight decay, Loshchilov & Hutter; the update of torch.optim.AdamW, on PyTorch's fused kernel)
// with weight decay excluded from biases and LayerNorm parameters, and a state that round-trips through
// checkpoints by parameter name.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "lib/io/checkpoint_file.h"

namespace cabert::train {

using NamedTensors = io::NamedTensors;

struct AdamWOptions {
  double lr = 3e-4;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;
};

// True for parameters that get weight decay: not biases, not LayerNorm weights. `module` is the root the
// names are relative to.
std::vector<std::string> weight_decay_exclusions(const torch::nn::Module& module);

class AdamW {
 public:
  // Parameters that require grad, by name; names in `no_decay` skip weight decay.
  AdamW(NamedTensors parameters, const std::vector<std::string>& no_decay, AdamWOptions options);
  // Convenience: all parameters of `module`, biases and LayerNorm weights excluded from decay.
  AdamW(const torch::nn::Module& module, AdamWOptions options);

  void set_lr(double lr) { options_.lr = lr; }
  double lr() const { return options_.lr; }
  // Drops the gradients (torch.optim's zero_grad(set_to_none=True)): the next backward writes them instead of
  // adding them to zeros, and a parameter that gets none is not updated.
  void zero_grad();
  void step();
  int64_t steps() const { return steps_; }

  // "exp_avg/<name>", "exp_avg_sq/<name>" and "step" (int64 scalar).
  NamedTensors state() const;
  // Throws DataError naming the first missing or mis-shaped tensor.
  void load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source);
  bool decays(const std::string& name) const;

 private:
  // The update of one parameter in ATen ops (the fused kernel's arithmetic); decay_factor 1 - lr wd, or 1.
  void step_op_by_op(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                     double decay_factor) const;
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
    bool decay;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t steps_ = 0;
};

}  // namespace cabert::train
