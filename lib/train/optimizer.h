// The optimisers' interface (the training loops step any of them and checkpoint its state by parameter name) and
// AdamW (decoupled weight decay, Loshchilov & Hutter; the update of torch.optim.AdamW, on PyTorch's fused kernel)
// with weight decay excluded from biases and LayerNorm parameters. Adafactor: lib/train/adafactor.h.
#pragma once

#include <torch/torch.h>

#include <map>
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

// The names of the parameters that get no weight decay: biases and LayerNorm weights. `module` is the root the
// names are relative to.
std::vector<std::string> weight_decay_exclusions(const torch::nn::Module& module);
// Every parameter of `module`, by its name from the root.
NamedTensors named_parameters(const torch::nn::Module& module);

class Optimizer {
 public:
  explicit Optimizer(double lr) : lr_(lr) {}
  virtual ~Optimizer() = default;
  // The training loops set the schedule's rate before every step.
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  int64_t steps() const { return steps_; }
  // Drops the gradients (torch.optim's zero_grad(set_to_none=True)): the next backward writes them instead of
  // adding them to zeros, and a parameter that gets none is not updated.
  virtual void zero_grad() = 0;
  virtual void step() = 0;
  // "step" (int64 scalar) and the optimiser's tensors by "<kind>/<parameter name>".
  virtual NamedTensors state() const = 0;
  // Throws DataError naming the first missing or mis-shaped tensor.
  virtual void load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) = 0;

 protected:
  double lr_;
  int64_t steps_ = 0;
};

// The tensor `name` of a loaded optimizer state, of the shape of `like` (unless undefined); a DataError naming
// `source` and the tensor otherwise.
torch::Tensor optimizer_state_tensor(const std::map<std::string, torch::Tensor>& state, const std::string& name,
                                     const torch::Tensor& like, const std::string& source);

class AdamW : public Optimizer {
 public:
  // Parameters that require grad, by name; names in `no_decay` skip weight decay.
  AdamW(NamedTensors parameters, const std::vector<std::string>& no_decay, AdamWOptions options);
  // Convenience: all parameters of `module`, biases and LayerNorm weights excluded from decay.
  AdamW(const torch::nn::Module& module, AdamWOptions options);

  void zero_grad() override;
  void step() override;
  // "exp_avg/<name>", "exp_avg_sq/<name>" and "step" (int64 scalar).
  NamedTensors state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) override;
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
  AdamWOptions options_;  // its lr is only the first: Optimizer::lr() is the current one
};

}  // namespace cabert::train
