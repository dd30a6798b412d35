// Adafactor (Shazeer & Stern 2018), T5's optimiser: second moments factored into row and column means for
// matrices (memory O(rows + columns) instead of O(rows x columns)), full for vectors; beta2 grows with the step
// (1 - t^decay_rate); each update's RMS clipped to clip_threshold; with `scale_parameter` (the "relative step"),
// the step is lr x max(eps_scale, RMS(parameter)), so lr is a relative size and one value serves parameters of every
// scale. No first moment unless beta1 > 0 (T5's). The update of transformers.optimization.Adafactor
// (tests/python/adafactor_reference.py checks it), except that lr is always the scheduled one: HF's
// relative_step=True, min(1e-2, 1/sqrt(t)), is the inverse-sqrt schedule, not a property of the optimiser here.
// Weight decay (decoupled, lr x weight_decay x parameter) skips biases and LayerNorm weights, as cabert's AdamW.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "lib/train/optimizer.h"

namespace cabert::train {

// T5's fine-tuning rate (Raffel et al. 2020, section 3.1.3: constant 1e-3 with Adafactor).
constexpr double kAdafactorFinetuneLr = 1e-3;

struct AdafactorOptions {
  double lr = 1e-3;               // the relative step size with scale_parameter, the absolute one without
  double eps_gradient = 1e-30;    // added to the squared gradient (HF's eps[0])
  double eps_scale = 1e-3;        // the least parameter RMS the step is scaled by (HF's eps[1])
  double clip_threshold = 1.0;    // an update whose RMS exceeds it is scaled down to it
  double decay_rate = -0.8;       // beta2 at step t: 1 - t^decay_rate
  double beta1 = 0;               // first-moment decay; 0 keeps no first moment
  double weight_decay = 0;
  bool scale_parameter = true;
};

class Adafactor : public Optimizer {
 public:
  Adafactor(NamedTensors parameters, const std::vector<std::string>& no_decay, AdafactorOptions options);
  Adafactor(const torch::nn::Module& module, AdafactorOptions options);

  void zero_grad() override;
  void step() override;
  // "step" (int64 scalar); for each matrix "exp_avg_sq_row/<name>" and "exp_avg_sq_col/<name>", for each other
  // parameter "exp_avg_sq/<name>"; "exp_avg/<name>" when beta1 > 0.
  NamedTensors state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) override;

 private:
  struct Slot {
    std::string name;
    torch::Tensor param;
    torch::Tensor row, column;  // factored second moments (matrices: dims >= 2), else undefined
    torch::Tensor second;       // full second moment (vectors and scalars), else undefined
    torch::Tensor first;        // beta1 > 0 only
    bool decay;
  };
  void update(Slot& slot, const torch::Tensor& grad, double beta2) const;
  std::vector<Slot> slots_;
  AdafactorOptions options_;
};

}  // namespace cabert::train
