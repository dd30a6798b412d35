// The convolution-branch ops on CUDA: kernels/cuda/conv_cuda_kernels.cuh's kernels and host code, launched on the
// current stream of the input's device (the tests run the same header on the CPU through
// tests/kernels/cuda_emulator.h). Every entry point first makes its input's device current (CUDAGuard), so that its
// allocations, its launches and getCurrentCUDAStream() all refer to that device (a tensor on cuda:1 with cuda:0
// current); every launch is checked.
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/conv_cuda.h"
#include "kernels/cuda/conv_cuda_kernels.cuh"
#include "kernels/cuda/cuda_launcher.cuh"

namespace cabert::kernels::cuda {

at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t pad,
                                const at::Tensor& mask) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  return impl::grouped_conv_forward<CudaLauncher>(x, weight, bias, pad, mask);
}

void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  impl::grouped_conv_backward<CudaLauncher>(grad, x, weight, pad, mask, grad_x, grad_weight_per_channel);
}

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  return impl::dynamic_conv_forward<CudaLauncher>(x, kernels, pad, mask);
}

void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  impl::dynamic_conv_backward<CudaLauncher>(grad, x, kernels, pad, mask, grad_x, grad_kernels);
}

at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads, int64_t length,
                         int64_t radius) {
  const c10::cuda::CUDAGuard device_guard(band.defined() ? band.device() : beta.device());
  return impl::relpos_expand<CudaLauncher>(band, beta, batch, heads, length, radius);
}

at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius) {
  const c10::cuda::CUDAGuard device_guard(grad.device());
  return impl::relpos_reduce<CudaLauncher>(grad, radius);
}

}  // namespace cabert::kernels::cuda
