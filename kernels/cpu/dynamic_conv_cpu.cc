// Dynamic convolution (and SDConv's unfold-and-weight step) on CPU. Tasks are (batch element, head): each
// owns the head's contiguous channel block of every position, so kernels[b, t, h, :] is read as a short run
// of scalars and every inner loop runs over the head's channels.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "kernels/conv_math.h"
#include "kernels/cpu/conv_cpu.h"
#include "kernels/cpu/vector_loops.h"

namespace cabert::kernels::cpu {
namespace {

struct Dims {
  int64_t batch, length, channels, heads, head_size, kernel_size, pad;
};

Dims dims_of(const at::Tensor& x, const at::Tensor& kernels, int64_t pad) {
  const int64_t heads = kernels.size(2);
  return {x.size(0), x.size(1), x.size(2), heads, x.size(2) / heads, kernels.size(3), pad};
}

template <typename T>
void forward_heads(const T* x, const T* kernels, const bool* mask_all, T* out, const Dims& d) {
  at::parallel_for(0, d.batch * d.heads, grain_for(d.length * d.head_size * d.kernel_size),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t task = begin; task < end; ++task) {
                       const int64_t b = task / d.heads, h = task % d.heads;
                       const int64_t c0 = h * d.head_size;
                       const T* xb = x + b * d.length * d.channels + c0;
                       const bool* mask = math::mask_row(mask_all, b, d.length);
                       for (int64_t t = 0; t < d.length; ++t) {
                         T* o = out + (b * d.length + t) * d.channels + c0;
                         if (!math::is_real(mask, t)) {
                           fill(o, T(0), d.head_size);
                           continue;
                         }
                         const T* kernel = kernels + ((b * d.length + t) * d.heads + h) * d.kernel_size;
                         const math::TapRange range = math::taps_of_output(t, d.length, d.kernel_size, d.pad);
                         accumulate_taps<T>(o, nullptr, d.head_size, [&](auto&& add) {
                           for (int64_t k = range.begin; k < range.end; ++k) {
                             const int64_t s = t + k - d.pad;
                             if (math::is_real(mask, s)) add(nullptr, kernel[k], xb + s * d.channels);
                           }
                         });
                       }
                     }
                   });
}

template <typename T>
void backward_heads(const T* grad, const T* x, const T* kernels, const bool* mask_all, T* grad_x, T* grad_kernels,
                    const Dims& d) {
  const int64_t kernel_row = d.heads * d.kernel_size;  // distance between kernels[b, t, h, 0] and [b, t+1, h, 0]
  at::parallel_for(0, d.batch * d.heads, grain_for(d.length * d.head_size * d.kernel_size),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t task = begin; task < end; ++task) {
                       const int64_t b = task / d.heads, h = task % d.heads;
                       const int64_t c0 = h * d.head_size;
                       const T* xb = x + b * d.length * d.channels + c0;
                       const T* gb = grad + b * d.length * d.channels + c0;
                       const T* kb = kernels + (b * d.length * d.heads + h) * d.kernel_size;
                       T* gkb = grad_kernels + (b * d.length * d.heads + h) * d.kernel_size;
                       const bool* mask = math::mask_row(mask_all, b, d.length);
                       for (int64_t s = 0; s < d.length; ++s) {
                         T* gx = grad_x + (b * d.length + s) * d.channels + c0;
                         if (!math::is_real(mask, s)) {
                           fill(gx, T(0), d.head_size);
                           continue;
                         }
                         const math::TapRange range = math::taps_of_source(s, d.length, d.kernel_size, d.pad);
                         accumulate_taps<T>(gx, nullptr, d.head_size, [&](auto&& add) {
                           for (int64_t k = range.begin; k < range.end; ++k) {
                             const int64_t t = s - k + d.pad;
                             if (math::is_real(mask, t)) add(nullptr, kb[t * kernel_row + k], gb + t * d.channels);
                           }
                         });
                       }
                       for (int64_t t = 0; t < d.length; ++t) {
                         T* gk = gkb + t * kernel_row;
                         fill(gk, T(0), d.kernel_size);
                         if (!math::is_real(mask, t)) continue;
                         const math::TapRange range = math::taps_of_output(t, d.length, d.kernel_size, d.pad);
                         for (int64_t k = range.begin; k < range.end; ++k) {
                           const int64_t s = t + k - d.pad;
                           if (math::is_real(mask, s))
                             gk[k] = dot(gb + t * d.channels, xb + s * d.channels, d.head_size);
                         }
                       }
                     }
                   });
}

const bool* mask_data(const at::Tensor& mask) { return mask.defined() ? mask.data_ptr<bool>() : nullptr; }

}  // namespace

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask) {
  const Dims d = dims_of(x, kernels, pad);
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_conv_forward", [&] {
    forward_heads<scalar_t>(x.data_ptr<scalar_t>(), kernels.data_ptr<scalar_t>(), mask_data(mask),
                            out.data_ptr<scalar_t>(), d);
  });
  return out;
}

void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels) {
  const Dims d = dims_of(x, kernels, pad);
  grad_x = at::empty_like(x);
  grad_kernels = at::empty_like(kernels);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_conv_backward", [&] {
    backward_heads<scalar_t>(grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), kernels.data_ptr<scalar_t>(),
                             mask_data(mask), grad_x.data_ptr<scalar_t>(), grad_kernels.data_ptr<scalar_t>(), d);
  });
}

}  // namespace cabert::kernels::cpu
