#include "lib/ops/span_dynamic_conv.h"

#include "lib/ops/conv_ops.h"

namespace cabert::ops {

torch::Tensor span_dynamic_conv(const torch::Tensor& q, const torch::Tensor& key_span, const torch::Tensor& v,
                                const torch::Tensor& kernel_weight, const torch::Tensor& kernel_bias, int64_t heads,
                                int64_t padding_left, const torch::Tensor& mask) {
  const int64_t B = v.size(0), T = v.size(1), K = kernel_weight.size(0) / heads;
  torch::Tensor logits = torch::nn::functional::linear(q * key_span, kernel_weight, kernel_bias);
  return dynamic_conv(v, torch::softmax(logits.view({B, T, heads, K}), -1), padding_left, mask);
}

}  // namespace cabert::ops
