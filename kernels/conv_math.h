// Per-element maths of the convolution-branch ops, shared by the CUDA kernels (one thread per output element)
// and the CPU kernels (tap ranges and relative indices; the per-element functions are also run on CPU by
// tests/kernels/conv_math_test.cc against the reference, so the CUDA arithmetic is tested on a machine
// without a GPU).
//
// Conventions: a "row" is one batch element of x, [T, C] contiguous; mask is that batch element's [T] bool
// row or nullptr (no mask). Output t reads source s = t + k - pad for tap k = 0..K-1.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CABERT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CABERT_HOST_DEVICE inline
#endif

namespace cabert::kernels::math {

struct TapRange {
  int64_t begin;  // first valid tap k
  int64_t end;    // one past the last valid tap
};

CABERT_HOST_DEVICE int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
CABERT_HOST_DEVICE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Taps k of output t whose source t + k - pad lies inside [0, length).
CABERT_HOST_DEVICE TapRange taps_of_output(int64_t t, int64_t length, int64_t kernel_size, int64_t pad) {
  return {max64(0, pad - t), min64(kernel_size, length - t + pad)};
}

// Taps k through which source s reaches an output t = s - k + pad inside [0, length).
CABERT_HOST_DEVICE TapRange taps_of_source(int64_t s, int64_t length, int64_t kernel_size, int64_t pad) {
  return {max64(0, s + pad - length + 1), min64(kernel_size, s + pad + 1)};
}

CABERT_HOST_DEVICE bool is_real(const bool* mask, int64_t t) { return mask == nullptr || mask[t]; }

// The [T] row of batch element b of a [B, T] mask (nullptr stays nullptr: no mask).
CABERT_HOST_DEVICE const bool* mask_row(const bool* mask, int64_t b, int64_t length) {
  return mask != nullptr ? mask + b * length : nullptr;
}

// r(i, j) = clamp(j - i, -radius, radius) + radius.
CABERT_HOST_DEVICE int64_t relative_index(int64_t i, int64_t j, int64_t radius) {
  return min64(max64(j - i, -radius), radius) + radius;
}

// out[t, c] of one row. Tap k of output t has weight taps[t * tap_row_stride + k]: tap_row_stride is 0 for
// position-independent weights (lightweight, depthwise: taps = that channel's weight row) and H * K for
// per-position kernels (dynamic: taps = &kernels[b, 0, h, 0]).
template <typename T>
CABERT_HOST_DEVICE T conv_output_element(const T* x, const bool* mask, const T* taps, int64_t tap_row_stride,
                                         int64_t t, int64_t c, int64_t length, int64_t channels,
                                         int64_t kernel_size, int64_t pad) {
  if (!is_real(mask, t)) return T(0);
  const TapRange range = taps_of_output(t, length, kernel_size, pad);
  T sum = T(0);
  for (int64_t k = range.begin; k < range.end; ++k) {
    const int64_t s = t + k - pad;
    if (is_real(mask, s)) sum += taps[t * tap_row_stride + k] * x[s * channels + c];
  }
  return sum;
}

// d loss / d x[s, c] of one row, given grad = d loss / d out (same tap layout as conv_output_element).
template <typename T>
CABERT_HOST_DEVICE T conv_input_grad_element(const T* grad, const bool* mask, const T* taps, int64_t tap_row_stride,
                                             int64_t s, int64_t c, int64_t length, int64_t channels,
                                             int64_t kernel_size, int64_t pad) {
  if (!is_real(mask, s)) return T(0);
  const TapRange range = taps_of_source(s, length, kernel_size, pad);
  T sum = T(0);
  for (int64_t k = range.begin; k < range.end; ++k) {
    const int64_t t = s - k + pad;
    if (is_real(mask, t)) sum += taps[t * tap_row_stride + k] * grad[t * channels + c];
  }
  return sum;
}

// d loss / d (weight of tap k at output t), summed over channels c_begin, c_begin + c_step, ... below c_end of one
// row: the gradient of a per-position kernel (dynamic conv, c range = one head; the CUDA kernel gives each of a
// warp's lanes every 32nd channel), or of one channel's weight at one position.
template <typename T>
CABERT_HOST_DEVICE T conv_tap_grad_element(const T* grad, const T* x, const bool* mask, int64_t t, int64_t k,
                                           int64_t c_begin, int64_t c_end, int64_t length, int64_t channels,
                                           int64_t pad, int64_t c_step = 1) {
  const int64_t s = t + k - pad;
  if (s < 0 || s >= length || !is_real(mask, t) || !is_real(mask, s)) return T(0);
  T sum = T(0);
  for (int64_t c = c_begin; c < c_end; c += c_step) sum += grad[t * channels + c] * x[s * channels + c];
  return sum;
}

// d loss / d weight[c, k] of a position-independent weight, contribution of the outputs t in [t_begin, t_end) of
// one row (the CUDA kernel splits T into chunks summed afterwards).
template <typename T>
CABERT_HOST_DEVICE T conv_weight_grad_range(const T* grad, const T* x, const bool* mask, int64_t c, int64_t k,
                                            int64_t t_begin, int64_t t_end, int64_t length, int64_t channels,
                                            int64_t pad) {
  T sum = T(0);
  for (int64_t t = max64(t_begin, pad - k); t < min64(t_end, length + pad - k); ++t) {
    sum += conv_tap_grad_element(grad, x, mask, t, k, c, c + 1, length, channels, pad);
  }
  return sum;
}

// The same over the whole row (summed over t).
template <typename T>
CABERT_HOST_DEVICE T conv_weight_grad_element(const T* grad, const T* x, const bool* mask, int64_t c, int64_t k,
                                              int64_t length, int64_t channels, int64_t pad) {
  return conv_weight_grad_range(grad, x, mask, c, k, 0, length, length, channels, pad);
}

// out[i, j] of one (batch, head) score matrix: band[i, r] (q . w[r] * scale, or nullptr) + beta[r] (or nullptr).
template <typename T>
CABERT_HOST_DEVICE T relpos_score_element(const T* band, const T* beta_row, int64_t i, int64_t j, int64_t radius) {
  const int64_t r = relative_index(i, j, radius);
  const int64_t width = 2 * radius + 1;
  return (band != nullptr ? band[i * width + r] : T(0)) + (beta_row != nullptr ? beta_row[r] : T(0));
}

// Sum of grad_row[j] (row i of one score matrix, length T) over the j with relative_index(i, j) == r: a
// single element inside the band, a whole tail at the clipped edges r = 0 and r = 2 radius.
template <typename T>
CABERT_HOST_DEVICE T relpos_band_grad_element(const T* grad_row, int64_t i, int64_t r, int64_t length,
                                              int64_t radius) {
  int64_t j_begin = i + r - radius, j_end = j_begin + 1;
  if (r == 0) j_begin = 0;            // j - i <= -radius
  if (r == 2 * radius) j_end = length;  // j - i >= radius
  j_begin = max64(j_begin, 0);
  j_end = min64(j_end, length);
  T sum = T(0);
  for (int64_t j = j_begin; j < j_end; ++j) sum += grad_row[j];
  return sum;
}

// Row i of a score matrix splits into the low tail j <= i - radius (all of r = 0), the single elements
// j = i + r - radius of 0 < r < 2 radius, and the high tail j >= i + radius (all of r = 2 radius); with radius 0
// the one offset takes the whole row. The CUDA reduction sums each tail with a warp: [0, low_end) and
// [high_begin, length).
CABERT_HOST_DEVICE int64_t relpos_low_tail_end(int64_t i, int64_t radius, int64_t length) {
  return radius == 0 ? length : max64(0, min64(i - radius + 1, length));
}
CABERT_HOST_DEVICE int64_t relpos_high_tail_begin(int64_t i, int64_t radius, int64_t length) {
  return min64(max64(i + radius, 0), length);
}

}  // namespace cabert::kernels::math
