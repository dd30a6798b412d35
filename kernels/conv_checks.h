// Argument checks shared by every implementation of the convolution-branch ops (reference, CPU, CUDA), so
// that a wrong shape fails with the same "expected X, got Y" sentence whichever path runs.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels {

struct ConvShape {
  int64_t batch = 0, length = 0, channels = 0, heads = 0, kernel_size = 0;
};

struct RelposShape {
  int64_t batch = 0, heads = 0, length = 0, head_size = 0, width = 0;  // width = 2 * radius + 1
};

// All throw cabert::UsageError naming the op, the argument and the expected versus actual shape.
ConvShape check_lightweight_conv(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                                 const at::Tensor& mask);
ConvShape check_dynamic_conv(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left,
                             const at::Tensor& mask);
ConvShape check_depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                               int64_t padding_left, const at::Tensor& mask);
RelposShape check_relative_position_scores(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta,
                                           int64_t radius);

}  // namespace cabert::kernels
