// The token mixer of a layer: the one module that moves information between positions. Everything else in
// a layer (output projection, residuals, LayerNorms, FFN) is the same for every family, so a paper's idea
// lives in exactly one mixer file:
//   composite_attention        Chang et al. 2021, self-attention with relative terms (Eq. 4-7)
//   convbert_mixed_attention   Jiang et al. 2020, bottleneck attention + SDConv (Eq. 6)
//   light_dynamic_conv_block   Wu et al. 2019, LightConv / DynamicConv blocks (Eq. 2-4)
// The families are listed, with how to build each, in mixer_registry.cc (an explicit table).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::models {

class Mixer : public torch::nn::Module {
 public:
  // x [B, T, H], mask bool [B, T] (true = real token; undefined = no padding) -> [B, T, output_size()].
  // Padding positions are masked in every branch.
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) = 0;
  // Width of the mixed output (the layer projects it back to the hidden size).
  virtual int64_t output_size() const = 0;
};

}  // namespace cabert::models
