// The maths of the convolution-branch ops that the CUDA kernels run, shared with the CPU kernels (tap ranges) and
// run on the CPU by tests/kernels/conv_math_test.cc against the reference, so that the CUDA arithmetic is tested
// on a machine without a GPU: the convolutions' tiles (the kernels' blocks) and the relative-position elements.
// The kernels themselves (kernels/cuda/conv_cuda_kernels.cuh) run on the CPU too, through
// tests/kernels/cuda_emulator.h (tests/kernels/cuda_kernels_emulated_test.cc).
//
// Conventions: a "row" is one batch element of x, [T, C] contiguous; mask is that batch element's [T] bool
// row or nullptr (no mask). Output t reads source s = t + k - pad for tap k = 0..K-1. The taps of channel c are
// taps[t * tap_row_stride + k]: tap_row_stride is 0 for position-independent weights (lightweight, depthwise:
// taps = that channel's weight row) and H * K for per-position kernels (dynamic: taps = &kernels[b, 0, h, 0]).
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

// ---- Tiles: how the CUDA kernels compute the convolutions ----
// A CUDA block takes kTileRows positions of one row (batch element) and kTileChannels channels (or, for the
// dynamic conv's kernel gradient, kTileTaps taps of one head), and the taps in chunks of kTileTaps. For each chunk
// it fills tiles of rows in shared memory, each entry zero where its position is off the row or padding, or its
// channel past the end: the zeros stand for the convolution's conditions (a padded output or source, a source off
// the row), so the sums over a tile are the convolution's sums, in chunks of taps or channels. Every read of
// the global rows is coalesced and each row is read once per tile instead of once per tap. The CPU tests sweep
// the tiles as the blocks do (tests/kernels/conv_math_test.cc).
constexpr int kTileRows = 32, kTileTaps = 32, kTileChannels = 32;
// A tile of rows that serves kTileRows positions over kTileTaps taps.
constexpr int kWideTileRows = kTileRows + kTileTaps - 1;

// Entry (row, c) of a tile of one row [T, C] of x or grad: zero off the row, at padding or at c >= c_end.
template <typename T>
CABERT_HOST_DEVICE T tile_entry(const T* rows, const bool* mask, int64_t row, int64_t c, int64_t c_end, int64_t length,
                                int64_t channels) {
  return row >= 0 && row < length && c < c_end && is_real(mask, row) ? rows[row * channels + c] : T(0);
}

// The forward of outputs t0 .. t0 + kTileRows - 1 over taps k0 .. k0 + kTileTaps - 1: source tile row i holds
// x[t0 + k0 - pad + i], and output i of channel column j adds taps[t (tap_row_stride) + k0 + k] x_tile[i + k][j]
// for the chunk's taps below kernel_size (taps, tap_row_stride: this column's channel's, as above).
template <typename T>
CABERT_HOST_DEVICE T tile_output_sum(const T* source_tile, int row_stride, int i, int j, const T* taps,
                                     int64_t tap_row_stride, int64_t t, int64_t k0, int64_t kernel_size) {
  const T* tap_row = taps + t * tap_row_stride + k0;
  const int count = static_cast<int>(min64(kTileTaps, kernel_size - k0));
  T sum = T(0);
  for (int k = 0; k < count; ++k) sum += tap_row[k] * source_tile[(i + k) * row_stride + j];
  return sum;
}

// The first position of the grad tile that serves sources s0 .. s0 + kTileRows - 1 over taps k0 .. k0 +
// kTileTaps - 1: source s reads output t = s - k + pad.
CABERT_HOST_DEVICE int64_t input_grad_tile_first_row(int64_t s0, int64_t k0, int64_t pad) {
  return s0 + pad - k0 - (kTileTaps - 1);
}

// The input gradient of source s = s0 + i over the chunk's taps: grad tile row i + kTileTaps - 1 - k holds output
// t = s - k0 - k + pad, whose tap k0 + k reached s. Only the taps whose output lies in [0, length) are summed (the
// weights of the others may not exist); that range is found once, so the loop has no test, and the taps' index
// steps by 1 - tap_row_stride (t falls by one as k rises by one), as the forward's loop steps through one row.
template <typename T>
CABERT_HOST_DEVICE T tile_input_grad_sum(const T* grad_tile, int row_stride, int i, int j, const T* taps,
                                         int64_t tap_row_stride, int64_t s, int64_t k0, int64_t kernel_size,
                                         int64_t length, int64_t pad) {
  const int64_t first_output = s - k0 + pad;  // t at k = 0
  const int begin = static_cast<int>(max64(0, first_output - length + 1));
  const int end = static_cast<int>(min64(min64(kTileTaps, kernel_size - k0), first_output + 1));
  const int64_t step = 1 - tap_row_stride;
  int64_t tap = (first_output - begin) * tap_row_stride + k0 + begin;
  T sum = T(0);
  for (int k = begin; k < end; ++k, tap += step) sum += taps[tap] * grad_tile[(i + kTileTaps - 1 - k) * row_stride + j];
  return sum;
}

// The position-independent weight's gradient (lightweight, depthwise) of the taps k0 + k of channel column j over
// the outputs of a grad tile (rows t0 .., zero past the end of the block's chunk of T) and its source tile (rows
// t0 + k0 - pad ..): the sum over the tile's rows i of grad_tile[i][j] source_tile[i + k][j].
template <typename T>
CABERT_HOST_DEVICE T weight_grad_tile_sum(const T* grad_tile, const T* source_tile, int row_stride, int k, int j) {
  T sum = T(0);
  for (int i = 0; i < kTileRows; ++i) sum += grad_tile[i * row_stride + j] * source_tile[(i + k) * row_stride + j];
  return sum;
}

// The dynamic conv's kernel gradient: a tile is kTileRows outputs t0 .. by kTileTaps taps k0 .. of one head, the
// head's channels in chunks of kTileChannels c0 ..: grad tile row i holds grad[t0 + i], source tile row i holds
// x[t0 + k0 - pad + i] (both over the chunk's channels, c_end the head's end), and output (i, k) adds the dot
// product of grad tile row i and source tile row i + k over the chunk.
template <typename T>
CABERT_HOST_DEVICE T kernel_grad_tile_dot(const T* grad_tile, const T* source_tile, int i, int k, int row_stride) {
  const T* g = grad_tile + i * row_stride;
  const T* x = source_tile + (i + k) * row_stride;
  T sum = T(0);
  for (int j = 0; j < kTileChannels; ++j) sum += g[j] * x[j];
  return sum;
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
CABERT_HOST_DEVICE T relpos_band_grad_element(const T* grad_row, int64_t i, int64_t r, int64_t length, int64_t radius) {
  int64_t j_begin = i + r - radius, j_end = j_begin + 1;
  if (r == 0) j_begin = 0;              // j - i <= -radius
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
