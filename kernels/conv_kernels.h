// Entry points of the fused kernels (the `--kernels fused` path of lib/ops/conv_ops.h). Each function checks
// its arguments, makes them contiguous, and is the one place where the device picks the implementation:
// CPU tensors -> kernels/cpu, CUDA tensors -> kernels/cuda (or a "built without CUDA" UsageError), anything
// else -> UsageError. Gradients are returned for every tensor argument that can have one.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels {

struct ConvGrads {
  at::Tensor x;
  at::Tensor weight;  // weight [H, K] / [C, K], or kernels [B, T, H, K] for dynamic_conv
  at::Tensor bias;    // depthwise_conv with a bias only
};

struct RelposGrads {
  at::Tensor q, w, beta;  // w / beta undefined when the forward had none
};

at::Tensor lightweight_conv_forward(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                                    const at::Tensor& mask);
ConvGrads lightweight_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                    int64_t padding_left, const at::Tensor& mask);

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left,
                                const at::Tensor& mask);
ConvGrads dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels,
                                int64_t padding_left, const at::Tensor& mask);

at::Tensor depthwise_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  int64_t padding_left, const at::Tensor& mask);
ConvGrads depthwise_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& bias, int64_t padding_left, const at::Tensor& mask);

at::Tensor relative_position_scores_forward(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta,
                                            int64_t radius, double scale);
RelposGrads relative_position_scores_backward(const at::Tensor& grad, const at::Tensor& q, const at::Tensor& w,
                                              const at::Tensor& beta, int64_t radius, double scale);

}  // namespace cabert::kernels
