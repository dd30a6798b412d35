// CUDA kernels of the convolution-branch ops: same contracts as kernels/cpu/conv_cpu.h, on contiguous CUDA
// tensors. Compiled only when CABERT_WITH_CUDA is defined; the per-element maths is kernels/conv_math.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels::cuda {

at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                int64_t pad, const at::Tensor& mask);
void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel);

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask);
void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels);

at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads,
                         int64_t length, int64_t radius);
at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius);

}  // namespace cabert::kernels::cuda
