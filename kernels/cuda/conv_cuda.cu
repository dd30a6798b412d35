// CUDA kernels of the convolution-branch ops: one thread per output element, the arithmetic of each element
// being the host/device functions of kernels/conv_math.h (which the CPU tests run against the reference).
// Any kernel size and padding work (taps are looped, never unrolled to a fixed K); grid-stride loops cover
// any size; every launch is checked.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/conv_math.h"
#include "kernels/cuda/conv_cuda.h"

namespace cabert::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

int blocks_for(int64_t n) { return static_cast<int>(math::min64((n + kThreads - 1) / kThreads, kMaxBlocks)); }

#define CABERT_GRID_LOOP(index, n) \
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < (n); index += int64_t(blockDim.x) * gridDim.x)

// Every entry point below first makes its input's device current (CUDAGuard), so that its allocations, its
// launches and getCurrentCUDAStream() all refer to that device (a tensor on cuda:1 with cuda:0 current).
template <typename Kernel, typename... Args>
void launch(int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  kernel<<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(n, args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// A kernel that gives each of its n items a whole warp (CABERT_WARP_LOOP).
template <typename Kernel, typename... Args>
void launch_warps(int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  constexpr int64_t kWarpsPerBlock = kThreads / 32;
  const int blocks = static_cast<int>(math::min64((n + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
  kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(n, args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

const bool* mask_data(const at::Tensor& mask) { return mask.defined() ? mask.data_ptr<bool>() : nullptr; }

// ---- lightweight / depthwise: weight [G, K], channel c uses row c / (C / G) ----

template <typename T>
__global__ void grouped_forward_kernel(int64_t n, const T* x, const T* weight, const T* bias, const bool* mask,
                                       T* out, int64_t length, int64_t channels, int64_t group_size,
                                       int64_t kernel_size, int64_t pad) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t c = index % channels, t = (index / channels) % length, b = index / (channels * length);
    const bool* m = math::mask_row(mask, b, length);
    const T* taps = weight + (c / group_size) * kernel_size;
    T value = math::conv_output_element(x + b * length * channels, m, taps, 0, t, c, length, channels,
                                        kernel_size, pad);
    if (bias != nullptr && math::is_real(m, t)) value += bias[c];
    out[index] = value;
  }
}

template <typename T>
__global__ void grouped_input_grad_kernel(int64_t n, const T* grad, const T* weight, const bool* mask, T* grad_x,
                                          int64_t length, int64_t channels, int64_t group_size, int64_t kernel_size,
                                          int64_t pad) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t c = index % channels, s = (index / channels) % length, b = index / (channels * length);
    const T* taps = weight + (c / group_size) * kernel_size;
    grad_x[index] = math::conv_input_grad_element(grad + b * length * channels, math::mask_row(mask, b, length), taps, 0,
                                                  s, c, length, channels, kernel_size, pad);
  }
}

// partial [B, chunks, K, C]: the weight gradient of each batch element and chunk of T (summed afterwards).
// Adjacent threads take adjacent channels, so each step over t reads contiguous grad and x rows (coalesced),
// and the chunks of T give the GPU B * chunks * K * C threads instead of B * C * K threads each walking all of T.
template <typename T>
__global__ void grouped_weight_grad_kernel(int64_t n, const T* grad, const T* x, const bool* mask, T* partial,
                                           int64_t length, int64_t channels, int64_t kernel_size, int64_t pad,
                                           int64_t chunks, int64_t chunk_length) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t c = index % channels, k = (index / channels) % kernel_size,
                  chunk = (index / (channels * kernel_size)) % chunks,
                  b = index / (channels * kernel_size * chunks);
    const int64_t t_begin = chunk * chunk_length, t_end = math::min64(length, t_begin + chunk_length);
    partial[index] = math::conv_weight_grad_range(grad + b * length * channels, x + b * length * channels,
                                                  math::mask_row(mask, b, length), c, k, t_begin, t_end, length,
                                                  channels, pad);
  }
}

// Chunks of T for the weight gradient: enough threads to fill a large GPU (about 2^18), each chunk at least 32
// positions long; a function of the shapes only, so the summation order (and the result) is the same on every GPU.
int64_t weight_grad_chunks(int64_t batch, int64_t length, int64_t channels, int64_t kernel_size) {
  const int64_t threads = math::max64(1, batch * channels * kernel_size);
  const int64_t wanted = math::max64(1, (int64_t{1} << 18) / threads);
  return math::max64(1, math::min64(wanted, (length + 31) / 32));
}

// Sum over the 32 lanes of a warp (every lane gets it).
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The warps of the grid: warp w of n_warps takes items w, w + n_warps, ... (every lane of a warp alike).
#define CABERT_WARP_LOOP(item, n)                                                                         \
  for (int64_t item = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; item < (n);                 \
       item += int64_t(blockDim.x) * gridDim.x / 32)

// ---- dynamic: kernels [B, T, H, K] ----

template <typename T>
__global__ void dynamic_forward_kernel(int64_t n, const T* x, const T* kernels, const bool* mask, T* out,
                                       int64_t length, int64_t channels, int64_t heads, int64_t kernel_size,
                                       int64_t pad) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t c = index % channels, t = (index / channels) % length, b = index / (channels * length);
    const int64_t h = c / (channels / heads);
    const T* taps = kernels + (b * length * heads + h) * kernel_size;
    out[index] = math::conv_output_element(x + b * length * channels, math::mask_row(mask, b, length), taps,
                                           heads * kernel_size, t, c, length, channels, kernel_size, pad);
  }
}

template <typename T>
__global__ void dynamic_input_grad_kernel(int64_t n, const T* grad, const T* kernels, const bool* mask, T* grad_x,
                                          int64_t length, int64_t channels, int64_t heads, int64_t kernel_size,
                                          int64_t pad) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t c = index % channels, s = (index / channels) % length, b = index / (channels * length);
    const int64_t h = c / (channels / heads);
    const T* taps = kernels + (b * length * heads + h) * kernel_size;
    grad_x[index] = math::conv_input_grad_element(grad + b * length * channels, math::mask_row(mask, b, length), taps,
                                                  heads * kernel_size, s, c, length, channels, kernel_size, pad);
  }
}

// One warp per kernel row (b, t, h), its K taps in turn: the lanes stride over the head's channels (coalesced
// reads of the grad and x rows) and a warp sum per tap replaces the serial dot product. The row is decoded once
// for its K taps: with one warp per tap, four 64-bit divisions per tap took most of the time (612 of 957 us of
// dynamicconv fwd+bwd at B=8 T=2048 C=256 H=4 K=31 on an H200, the forward 96 us). Every lane takes every tap
// (the skip of a tap outside the row is the same for the whole warp), as the shuffles need.
template <typename T>
__global__ void dynamic_kernel_grad_kernel(int64_t rows, const T* grad, const T* x, const bool* mask,
                                           T* grad_kernels, int64_t length, int64_t channels, int64_t heads,
                                           int64_t kernel_size, int64_t pad) {
  const int lane = threadIdx.x % 32;
  const int64_t head_size = channels / heads;
  CABERT_WARP_LOOP(row, rows) {  // row = (b T + t) H + h: grad_kernels[row K + k]
    const int64_t h = row % heads, t = (row / heads) % length, b = row / (heads * length);
    const T* grad_batch = grad + b * length * channels;
    const T* x_batch = x + b * length * channels;
    const bool* mask_batch = math::mask_row(mask, b, length);
    for (int64_t k = 0; k < kernel_size; ++k) {
      const T sum = warp_sum(math::conv_tap_grad_element(grad_batch, x_batch, mask_batch, t, k, h * head_size + lane,
                                                         (h + 1) * head_size, length, channels, pad,
                                                         /*c_step=*/32));
      if (lane == 0) grad_kernels[row * kernel_size + k] = sum;
    }
  }
}

// ---- relative positions ----

template <typename T>
__global__ void relpos_expand_kernel(int64_t n, const T* band, const T* beta, T* out, int64_t heads, int64_t length,
                                     int64_t radius) {
  CABERT_GRID_LOOP(index, n) {
    const int64_t j = index % length, i = (index / length) % length, matrix = index / (length * length);
    const int64_t width = 2 * radius + 1;
    out[index] = math::relpos_score_element(band ? band + matrix * length * width : nullptr,
                                            beta ? beta + (matrix % heads) * width : nullptr, i, j, radius);
  }
}

// One warp per score-matrix row: the single elements of the inner offsets are copied lane by lane, and the two
// clipped tails (all j <= i - radius, all j >= i + radius: each up to a whole row) are summed by all 32 lanes
// with coalesced reads, instead of one thread per tail.
template <typename T>
__global__ void relpos_reduce_kernel(int64_t n, const T* grad, T* band_grad, int64_t length, int64_t radius) {
  const int lane = threadIdx.x % 32;
  const int64_t width = 2 * radius + 1;
  CABERT_WARP_LOOP(row, n) {
    const int64_t i = row % length;
    const T* g = grad + row * length;
    T* out = band_grad + row * width;
    for (int64_t r = 1 + lane; r < width - 1; r += 32) {
      out[r] = math::relpos_band_grad_element(g, i, r, length, radius);
    }
    T low = T(0), high = T(0);
    const int64_t low_end = math::relpos_low_tail_end(i, radius, length);
    for (int64_t j = lane; j < low_end; j += 32) low += g[j];
    if (radius > 0) {
      for (int64_t j = math::relpos_high_tail_begin(i, radius, length) + lane; j < length; j += 32) high += g[j];
    }
    low = warp_sum(low);
    high = warp_sum(high);
    if (lane == 0) {
      out[0] = low;
      if (radius > 0) out[width - 1] = high;
    }
  }
}

template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                int64_t pad, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  const int64_t length = x.size(1), channels = x.size(2);
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grouped_conv_forward_cuda", [&] {
    launch(x.numel(), grouped_forward_kernel<scalar_t>, x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
           data_or_null<scalar_t>(bias), mask_data(mask), out.data_ptr<scalar_t>(), length, channels,
           channels / weight.size(0), weight.size(1), pad);
  });
  return out;
}

void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  const int64_t batch = x.size(0), length = x.size(1), channels = x.size(2), kernel_size = weight.size(1);
  grad_x = at::empty_like(x);
  const int64_t chunks = weight_grad_chunks(batch, length, channels, kernel_size);
  const int64_t chunk_length = (length + chunks - 1) / chunks;
  at::Tensor partial = at::empty({batch, chunks, kernel_size, channels}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grouped_conv_backward_cuda", [&] {
    launch(x.numel(), grouped_input_grad_kernel<scalar_t>, grad.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
           mask_data(mask), grad_x.data_ptr<scalar_t>(), length, channels, channels / weight.size(0), kernel_size,
           pad);
    launch(partial.numel(), grouped_weight_grad_kernel<scalar_t>, grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
           mask_data(mask), partial.data_ptr<scalar_t>(), length, channels, kernel_size, pad, chunks,
           chunk_length);
  });
  grad_weight_per_channel = partial.sum(at::IntArrayRef{0, 1}).t().contiguous();  // [K, C] -> [C, K]
}

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_conv_forward_cuda", [&] {
    launch(x.numel(), dynamic_forward_kernel<scalar_t>, x.data_ptr<scalar_t>(), kernels.data_ptr<scalar_t>(),
           mask_data(mask), out.data_ptr<scalar_t>(), x.size(1), x.size(2), kernels.size(2), kernels.size(3), pad);
  });
  return out;
}

void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  grad_x = at::empty_like(x);
  grad_kernels = at::empty_like(kernels);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_conv_backward_cuda", [&] {
    launch(x.numel(), dynamic_input_grad_kernel<scalar_t>, grad.data_ptr<scalar_t>(), kernels.data_ptr<scalar_t>(),
           mask_data(mask), grad_x.data_ptr<scalar_t>(), x.size(1), x.size(2), kernels.size(2), kernels.size(3),
           pad);
    launch_warps(kernels.numel() / math::max64(kernels.size(3), 1), dynamic_kernel_grad_kernel<scalar_t>,
                 grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), mask_data(mask),
                 grad_kernels.data_ptr<scalar_t>(), x.size(1), x.size(2), kernels.size(2), kernels.size(3), pad);
  });
}

at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads,
                         int64_t length, int64_t radius) {
  const at::Tensor& like = band.defined() ? band : beta;
  const c10::cuda::CUDAGuard device_guard(like.device());
  at::Tensor out = at::empty({batch, heads, length, length}, like.options());
  AT_DISPATCH_FLOATING_TYPES(like.scalar_type(), "relpos_expand_cuda", [&] {
    launch(out.numel(), relpos_expand_kernel<scalar_t>, data_or_null<scalar_t>(band), data_or_null<scalar_t>(beta),
           out.data_ptr<scalar_t>(), heads, length, radius);
  });
  return out;
}

at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius) {
  const c10::cuda::CUDAGuard device_guard(grad.device());
  const int64_t length = grad.size(3);
  at::Tensor band_grad = at::empty({grad.size(0), grad.size(1), length, 2 * radius + 1}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "relpos_reduce_cuda", [&] {
    launch_warps(grad.numel() / math::max64(length, 1), relpos_reduce_kernel<scalar_t>, grad.data_ptr<scalar_t>(),
                 band_grad.data_ptr<scalar_t>(), length, radius);
  });
  return band_grad;
}

}  // namespace cabert::kernels::cuda
