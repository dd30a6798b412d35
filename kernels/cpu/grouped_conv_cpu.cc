// Lightweight and depthwise convolution on CPU: both are a depthwise convolution whose [C, K] weight has rows
// shared by groups of channels. Tasks are (batch element, block of channels); each task walks the time axis
// once, so x, the output and the gradients are touched O(K) times from cache and never unfolded.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "kernels/conv_math.h"
#include "kernels/cpu/conv_cpu.h"
#include "kernels/cpu/vector_loops.h"

namespace cabert::kernels::cpu {
namespace {

constexpr int64_t kChannelBlock = 64;

struct Blocks {
  int64_t per_row, count;
};

Blocks channel_blocks(int64_t batch, int64_t channels) {
  const int64_t per_row = (channels + kChannelBlock - 1) / kChannelBlock;
  return {per_row, batch * per_row};
}

// [G, K] -> [K, C]: tap-major so the innermost loop reads one contiguous channel run per tap.
at::Tensor taps_by_channel(const at::Tensor& weight, int64_t channels) {
  return weight.repeat_interleave(channels / weight.size(0), 0).t().contiguous();
}

template <typename T>
void forward_rows(const T* x, const T* taps, const T* bias, const bool* mask_all, T* out, int64_t batch, int64_t length,
                  int64_t channels, int64_t kernel_size, int64_t pad) {
  const Blocks blocks = channel_blocks(batch, channels);
  at::parallel_for(0, blocks.count, grain_for(length * kChannelBlock * kernel_size), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / blocks.per_row;
      const int64_t c0 = (task % blocks.per_row) * kChannelBlock;
      const int64_t width = math::min64(kChannelBlock, channels - c0);
      const T* xb = x + b * length * channels + c0;
      const bool* mask = math::mask_row(mask_all, b, length);
      for (int64_t t = 0; t < length; ++t) {
        T* o = out + (b * length + t) * channels + c0;
        if (!math::is_real(mask, t)) {
          fill(o, T(0), width);
          continue;
        }
        const math::TapRange range = math::taps_of_output(t, length, kernel_size, pad);
        accumulate_taps<T>(o, bias ? bias + c0 : nullptr, width, [&](auto&& add) {
          for (int64_t k = range.begin; k < range.end; ++k) {
            const int64_t s = t + k - pad;
            if (math::is_real(mask, s)) add(taps + k * channels + c0, T(0), xb + s * channels);
          }
        });
      }
    }
  });
}

template <typename T>
void backward_rows(const T* grad, const T* x, const T* taps, const bool* mask_all, T* grad_x, T* partial, int64_t batch,
                   int64_t length, int64_t channels, int64_t kernel_size, int64_t pad) {
  const Blocks blocks = channel_blocks(batch, channels);
  at::parallel_for(0, blocks.count, grain_for(length * kChannelBlock * kernel_size), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / blocks.per_row;
      const int64_t c0 = (task % blocks.per_row) * kChannelBlock;
      const int64_t width = math::min64(kChannelBlock, channels - c0);
      const T* xb = x + b * length * channels + c0;
      const T* gb = grad + b * length * channels + c0;
      T* part = partial + b * kernel_size * channels + c0;  // [K, C] slice of this batch element
      const bool* mask = math::mask_row(mask_all, b, length);
      for (int64_t s = 0; s < length; ++s) {
        // grad_x[s] gathers the outputs that read s (the transposed convolution), so no two tasks write the
        // same element and no atomics are needed.
        T* gx = grad_x + (b * length + s) * channels + c0;
        if (!math::is_real(mask, s)) {
          fill(gx, T(0), width);
          continue;
        }
        const math::TapRange range = math::taps_of_source(s, length, kernel_size, pad);
        accumulate_taps<T>(gx, nullptr, width, [&](auto&& add) {
          for (int64_t k = range.begin; k < range.end; ++k) {
            const int64_t t = s - k + pad;
            if (math::is_real(mask, t)) add(taps + k * channels + c0, T(0), gb + t * channels);
          }
        });
      }
      // Weight gradient of tap k: sum over t of grad[t] * x[t + k - pad], accumulated in registers over a
      // tile of positions (the tile of x and grad stays in L1/L2 across the K taps).
      constexpr int64_t kTile = 32;
      for (int64_t t0 = 0; t0 < length; t0 += kTile) {
        const int64_t t1 = math::min64(length, t0 + kTile);
        for (int64_t k = 0; k < kernel_size; ++k) {
          const int64_t t_begin = math::max64(t0, pad - k), t_end = math::min64(t1, length + pad - k);
          if (t_begin >= t_end) continue;
          T* pk = part + k * channels;
          accumulate_taps<T>(pk, pk, width, [&](auto&& add) {
            for (int64_t t = t_begin; t < t_end; ++t) {
              const int64_t s = t + k - pad;
              if (math::is_real(mask, t) && math::is_real(mask, s)) add(gb + t * channels, T(0), xb + s * channels);
            }
          });
        }
      }
    }
  });
}

const bool* mask_data(const at::Tensor& mask) { return mask.defined() ? mask.data_ptr<bool>() : nullptr; }

}  // namespace

at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t pad,
                                const at::Tensor& mask) {
  const int64_t batch = x.size(0), length = x.size(1), channels = x.size(2), kernel_size = weight.size(1);
  at::Tensor taps = taps_by_channel(weight, channels);
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grouped_conv_forward", [&] {
    forward_rows<scalar_t>(x.data_ptr<scalar_t>(), taps.data_ptr<scalar_t>(),
                           bias.defined() ? bias.data_ptr<scalar_t>() : nullptr, mask_data(mask),
                           out.data_ptr<scalar_t>(), batch, length, channels, kernel_size, pad);
  });
  return out;
}

void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel) {
  const int64_t batch = x.size(0), length = x.size(1), channels = x.size(2), kernel_size = weight.size(1);
  at::Tensor taps = taps_by_channel(weight, channels);
  grad_x = at::empty_like(x);
  at::Tensor partial = at::zeros({batch, kernel_size, channels}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grouped_conv_backward", [&] {
    backward_rows<scalar_t>(grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), taps.data_ptr<scalar_t>(),
                            mask_data(mask), grad_x.data_ptr<scalar_t>(), partial.data_ptr<scalar_t>(), batch, length,
                            channels, kernel_size, pad);
  });
  grad_weight_per_channel = partial.sum(0).t();  // [C, K]
}

}  // namespace cabert::kernels::cpu
