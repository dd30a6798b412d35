// The CUDA kernels of the convolution-branch ops and the host code that launches them, in one header that two
// compilers take: nvcc for kernels/cuda/conv_cuda.cu (launches on the current CUDA stream) and the host compiler for
// tests/kernels/cuda_kernels_emulated_test.cc, which includes tests/kernels/cuda_emulator.h first and runs these same
// kernels on the CPU, threads, shared memory and barriers included. The host code takes a Launcher:
// Launcher::run(blocks, threads, kernel, args...) runs kernel<<<blocks, threads>>>(args...); a grid has at most
// Launcher::kMaxBlocks blocks (the kernels' grid-stride loops take the rest); Launcher::kFillBlocks blocks fill the
// device (the weight gradient's chunks of T are sized by it). The tests shrink both, so that every block takes
// several tiles and every chunk several tiles of rows, paths that only very large shapes take on a GPU.
//
// The convolutions run in tiles through shared memory, one block per tile of positions by channels (or taps), the
// taps or channels in chunks, with the tile maths of kernels/conv_math.h; the relative-position kernels take one
// thread per score (one warp per score row in the reduction), with conv_math.h's per-element maths. Any kernel size
// and padding work (taps are looped in chunks, never unrolled to a fixed K); grid-stride loops cover any size.
#pragma once

#if !defined(__CUDACC__) && !defined(CABERT_CUDA_EMULATION)
#error "kernels/cuda/conv_cuda_kernels.cuh: compile it with nvcc, or include tests/kernels/cuda_emulator.h first"
#endif

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cstdint>

#include "kernels/conv_math.h"

namespace cabert::kernels::cuda::impl {

constexpr int kThreads = 256;

// The launches' grid sizes: at most Launcher::kMaxBlocks blocks (the kernels' grid-stride loops take the rest).
template <typename Launcher>
int capped_blocks(int64_t blocks) {
  return static_cast<int>(math::min64(blocks, Launcher::kMaxBlocks));
}

#define CABERT_GRID_LOOP(index, n)                                                  \
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < (n); \
       index += int64_t(blockDim.x) * gridDim.x)

// A kernel that gives each of its n items a thread (CABERT_GRID_LOOP).
template <typename Launcher, typename Kernel, typename... Args>
void launch(int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  Launcher::run(capped_blocks<Launcher>((n + kThreads - 1) / kThreads), kThreads, kernel, n, args...);
}

// A kernel that gives each of its n items a whole warp (CABERT_WARP_LOOP).
template <typename Launcher, typename Kernel, typename... Args>
void launch_warps(int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  constexpr int64_t kWarpsPerBlock = kThreads / 32;
  Launcher::run(capped_blocks<Launcher>((n + kWarpsPerBlock - 1) / kWarpsPerBlock), kThreads, kernel, n, args...);
}

// A kernel that gives each of its n items a whole block (a grid-stride loop over blockIdx.x).
template <typename Launcher, typename Kernel, typename... Args>
void launch_blocks(int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  Launcher::run(capped_blocks<Launcher>(n), kThreads, kernel, n, args...);
}

inline const bool* mask_data(const at::Tensor& mask) { return mask.defined() ? mask.data_ptr<bool>() : nullptr; }

// ---- the tiled convolutions (kernels/conv_math.h: tiles) ----

// A block's 256 threads: kTileChannels (or kTileTaps) columns by kRowGroups row groups; row group g takes the
// tile's rows g, g + kRowGroups, ...; tile rows are padded by one entry so that a warp's 32 columns read 32
// different shared-memory banks.
constexpr int kRowGroups = kThreads / math::kTileChannels;
constexpr int kRowsPerThread = math::kTileRows / kRowGroups;
constexpr int kTileStride = math::kTileChannels + 1;
static_assert(math::kTileChannels == math::kTileTaps && kThreads % math::kTileChannels == 0 &&
                  math::kTileRows % kRowGroups == 0,
              "tile shape");

// Fills rows [0, tile_rows) of a shared tile with the entries of rows first_row .. of one row [T, C] (zero off
// the row, at padding, at channels from c_end; positions from `length` on count as off the row).
template <typename T>
__device__ void fill_tile(T* tile, int tile_rows, const T* rows, const bool* mask, int64_t first_row, int64_t c0,
                          int64_t c_end, int64_t length, int64_t channels) {
  for (int e = threadIdx.x; e < tile_rows * math::kTileChannels; e += blockDim.x) {
    const int i = e / math::kTileChannels, j = e % math::kTileChannels;
    tile[i * kTileStride + j] = math::tile_entry(rows, mask, first_row + i, c0 + j, c_end, length, channels);
  }
}

// The taps of channel c in batch element b: position-independent weights [G, K] (batch_stride 0, tap_row_stride
// 0, group_size C / G) or per-position kernels [B, T, H, K] (batch_stride T H K, tap_row_stride H K, group_size
// C / H): conv_math's (taps, tap_row_stride) convention.
struct TapLayout {
  int64_t batch_stride, group_size, tap_row_stride;
};

template <typename T>
__device__ const T* taps_of(const T* weights, const TapLayout& layout, int64_t b, int64_t c, int64_t kernel_size) {
  return weights + b * layout.batch_stride + (c / layout.group_size) * kernel_size;
}

// The forward (kInputGrad false: rows = x, outputs t) or the input gradient (true: rows = grad, sources s), one
// block per tile of kTileRows positions by kTileChannels channels of one batch element (tile = (b row_tiles + row
// tile) channel_tiles + channel tile), the taps in chunks, each chunk's rows of x (or grad) in shared memory; bias
// (or nullptr) is added at real positions.
template <typename T, bool kInputGrad>
__global__ void conv_tiles_kernel(int64_t tiles, const T* rows, const T* weights, TapLayout layout, const T* bias,
                                  const bool* mask, T* out, int64_t length, int64_t channels, int64_t kernel_size,
                                  int64_t pad, int64_t row_tiles, int64_t channel_tiles) {
  __shared__ T tile_rows[math::kWideTileRows * kTileStride];
  const int j = threadIdx.x % math::kTileChannels, row_group = threadIdx.x / math::kTileChannels;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t c0 = (tile % channel_tiles) * math::kTileChannels;
    const int64_t t0 = (tile / channel_tiles % row_tiles) * math::kTileRows, b = tile / (channel_tiles * row_tiles);
    const T* rows_batch = rows + b * length * channels;
    const bool* mask_batch = math::mask_row(mask, b, length);
    const int64_t c = c0 + j;
    const T* taps = c < channels ? taps_of(weights, layout, b, c, kernel_size) : nullptr;
    T sums[kRowsPerThread] = {};
    for (int64_t k0 = 0; k0 < kernel_size; k0 += math::kTileTaps) {
      __syncthreads();  // every thread is done with the previous chunk's tile
      const int64_t first_row = kInputGrad ? math::input_grad_tile_first_row(t0, k0, pad) : t0 + k0 - pad;
      fill_tile(tile_rows, math::kWideTileRows, rows_batch, mask_batch, first_row, c0, channels, length, channels);
      __syncthreads();
      if (c >= channels) continue;
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int i = row_group + kRowGroups * r;
        if (t0 + i >= length) continue;
        sums[r] += kInputGrad ? math::tile_input_grad_sum(tile_rows, kTileStride, i, j, taps, layout.tap_row_stride,
                                                          t0 + i, k0, kernel_size, length, pad)
                              : math::tile_output_sum(tile_rows, kTileStride, i, j, taps, layout.tap_row_stride, t0 + i,
                                                      k0, kernel_size);
      }
    }
    if (c >= channels) continue;
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t t = t0 + row_group + kRowGroups * r;
      if (t >= length) continue;
      const bool real = math::is_real(mask_batch, t);
      out[(b * length + t) * channels + c] = real ? sums[r] + (bias != nullptr ? bias[c] : T(0)) : T(0);
    }
  }
}

// partial [B, chunks, K, C]: the position-independent weight's gradient of each batch element and chunk of T
// (summed afterwards), one block per (b, chunk, channel tile, tap tile) taking the chunk's tiles of rows in turn;
// thread (row group, column j) takes taps k0 + row group + kRowGroups r of channel c0 + j.
template <typename T>
__global__ void grouped_weight_grad_kernel(int64_t tiles, const T* grad, const T* x, const bool* mask, T* partial,
                                           int64_t length, int64_t channels, int64_t kernel_size, int64_t pad,
                                           int64_t chunks, int64_t chunk_length, int64_t channel_tiles,
                                           int64_t tap_tiles) {
  __shared__ T grad_tile[math::kTileRows * kTileStride];
  __shared__ T source_tile[math::kWideTileRows * kTileStride];
  const int j = threadIdx.x % math::kTileChannels, row_group = threadIdx.x / math::kTileChannels;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    // tile = ((b chunks + chunk) channel_tiles + channel tile) tap_tiles + tap tile
    const int64_t k0 = (tile % tap_tiles) * math::kTileTaps;
    const int64_t c0 = (tile / tap_tiles % channel_tiles) * math::kTileChannels;
    const int64_t chunk = tile / (tap_tiles * channel_tiles) % chunks, b = tile / (tap_tiles * channel_tiles * chunks);
    const int64_t t_end = math::min64(length, (chunk + 1) * chunk_length);
    const T* grad_batch = grad + b * length * channels;
    const T* x_batch = x + b * length * channels;
    const bool* mask_batch = math::mask_row(mask, b, length);
    T sums[kRowsPerThread] = {};
    for (int64_t t0 = chunk * chunk_length; t0 < t_end; t0 += math::kTileRows) {
      __syncthreads();
      fill_tile(grad_tile, math::kTileRows, grad_batch, mask_batch, t0, c0, channels, t_end, channels);
      fill_tile(source_tile, math::kWideTileRows, x_batch, mask_batch, t0 + k0 - pad, c0, channels, length, channels);
      __syncthreads();
      for (int r = 0; r < kRowsPerThread; ++r) {
        sums[r] += math::weight_grad_tile_sum(grad_tile, source_tile, kTileStride, row_group + kRowGroups * r, j);
      }
    }
    const int64_t c = c0 + j;
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t k = k0 + row_group + kRowGroups * r;
      if (c < channels && k < kernel_size) partial[((b * chunks + chunk) * kernel_size + k) * channels + c] = sums[r];
    }
  }
}

// Chunks of T for the weight gradient, each a whole number of tiles of rows: enough blocks to fill the device
// (fill_blocks: 2048 for any GPU), as few chunks as that allows (the partial sums are summed afterwards); a function
// of the shapes only, so the summation order (and the result) is the same on every GPU.
inline int64_t weight_grad_chunk_length(int64_t batch, int64_t length, int64_t channels, int64_t kernel_size,
                                        int64_t fill_blocks) {
  const int64_t blocks_per_chunk = math::max64(1, batch * ((channels + math::kTileChannels - 1) / math::kTileChannels) *
                                                      ((kernel_size + math::kTileTaps - 1) / math::kTileTaps));
  const int64_t row_tiles = math::max64(1, (length + math::kTileRows - 1) / math::kTileRows);
  const int64_t chunks =
      math::max64(1, math::min64(row_tiles, (fill_blocks + blocks_per_chunk - 1) / blocks_per_chunk));
  return (row_tiles + chunks - 1) / chunks * math::kTileRows;
}

// Sum over the 32 lanes of a warp (every lane gets it).
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The warps of the grid: warp w of n_warps takes items w, w + n_warps, ... (every lane of a warp alike).
#define CABERT_WARP_LOOP(item, n)                                                        \
  for (int64_t item = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; item < (n); \
       item += int64_t(blockDim.x) * gridDim.x / 32)

// ---- dynamic: kernels [B, T, H, K] ----

// The kernel gradient in tiles (math::kernel_grad_tile_dot): one block per tile of kTileRows outputs by kTileTaps
// taps of one (b, h), the head's channels in chunks through shared memory; thread (row group, tap) of the block
// takes tap k0 + tap of the outputs t0 + row group + kRowGroups r. Its history on B=8 T=2048 C=256 H=4 K=31
// (fwd+bwd of dynamicconv): one warp per tap, each decoding its index with four 64-bit divisions, took 612 of
// 957 us on an H200; one warp per kernel row, its K taps in turn with a warp sum each, 329 of 681 us busy on an
// H100 (2026-11-28): the grad row re-read and 5 shuffles per tap.
template <typename T>
__global__ void dynamic_kernel_grad_kernel(int64_t tiles, const T* grad, const T* x, const bool* mask, T* grad_kernels,
                                           int64_t length, int64_t channels, int64_t heads, int64_t kernel_size,
                                           int64_t pad, int64_t row_tiles, int64_t tap_tiles) {
  __shared__ T grad_tile[math::kTileRows * kTileStride];
  __shared__ T source_tile[math::kWideTileRows * kTileStride];
  const int64_t head_size = channels / heads;
  const int tap = threadIdx.x % math::kTileTaps, row_group = threadIdx.x / math::kTileTaps;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    // tile = ((b H + h) row_tiles + row tile) tap_tiles + tap tile
    const int64_t k0 = (tile % tap_tiles) * math::kTileTaps, t0 = (tile / tap_tiles % row_tiles) * math::kTileRows;
    const int64_t h = tile / (tap_tiles * row_tiles) % heads, b = tile / (tap_tiles * row_tiles * heads);
    const T* grad_batch = grad + b * length * channels;
    const T* x_batch = x + b * length * channels;
    const bool* mask_batch = math::mask_row(mask, b, length);
    const int64_t c_end = (h + 1) * head_size;
    T sums[kRowsPerThread] = {};
    for (int64_t c0 = h * head_size; c0 < c_end; c0 += math::kTileChannels) {
      __syncthreads();  // every thread is done with the previous chunk's tiles
      fill_tile(grad_tile, math::kTileRows, grad_batch, mask_batch, t0, c0, c_end, length, channels);
      fill_tile(source_tile, math::kWideTileRows, x_batch, mask_batch, t0 + k0 - pad, c0, c_end, length, channels);
      __syncthreads();
      for (int r = 0; r < kRowsPerThread; ++r) {
        sums[r] += math::kernel_grad_tile_dot(grad_tile, source_tile, row_group + kRowGroups * r, tap, kTileStride);
      }
    }
    const int64_t k = k0 + tap;
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t t = t0 + row_group + kRowGroups * r;
      if (t < length && k < kernel_size) grad_kernels[((b * length + t) * heads + h) * kernel_size + k] = sums[r];
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

// ---- host code ----

// Tiles of rows by channels of a [B, T, C] tensor (the forward's and the input gradient's).
struct RowTiles {
  int64_t row_tiles, channel_tiles;
  int64_t count(int64_t batch) const { return batch * row_tiles * channel_tiles; }
};

inline RowTiles row_tiles_of(const at::Tensor& x) {
  return {(x.size(1) + math::kTileRows - 1) / math::kTileRows,
          (x.size(2) + math::kTileChannels - 1) / math::kTileChannels};
}

inline TapLayout grouped_layout(const at::Tensor& x, const at::Tensor& weight) {
  return {0, x.size(2) / weight.size(0), 0};
}

inline TapLayout dynamic_layout(const at::Tensor& x, const at::Tensor& kernels) {
  const int64_t heads = kernels.size(2), kernel_size = kernels.size(3);
  return {x.size(1) * heads * kernel_size, x.size(2) / heads, heads * kernel_size};
}

// The forward of x (input_grad false) or the input gradient of grad (true), [B, T, C].
template <typename Launcher>
at::Tensor conv_tiles(const at::Tensor& rows, const at::Tensor& weights, const TapLayout& layout,
                      const at::Tensor& bias, int64_t kernel_size, int64_t pad, const at::Tensor& mask,
                      bool input_grad) {
  at::Tensor out = at::empty_like(rows);
  const RowTiles tiles = row_tiles_of(rows);
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "conv_tiles_cuda", [&] {
    launch_blocks<Launcher>(
        tiles.count(rows.size(0)), input_grad ? conv_tiles_kernel<scalar_t, true> : conv_tiles_kernel<scalar_t, false>,
        rows.data_ptr<scalar_t>(), weights.data_ptr<scalar_t>(), layout, data_or_null<scalar_t>(bias), mask_data(mask),
        out.data_ptr<scalar_t>(), rows.size(1), rows.size(2), kernel_size, pad, tiles.row_tiles, tiles.channel_tiles);
  });
  return out;
}

template <typename Launcher>
at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t pad,
                                const at::Tensor& mask) {
  return conv_tiles<Launcher>(x, weight, grouped_layout(x, weight), bias, weight.size(1), pad, mask, false);
}

template <typename Launcher>
void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel) {
  const int64_t batch = x.size(0), length = x.size(1), channels = x.size(2), kernel_size = weight.size(1);
  grad_x = conv_tiles<Launcher>(grad, weight, grouped_layout(x, weight), at::Tensor(), kernel_size, pad, mask, true);
  const int64_t chunk_length = weight_grad_chunk_length(batch, length, channels, kernel_size, Launcher::kFillBlocks);
  const int64_t chunks = math::max64(1, (length + chunk_length - 1) / chunk_length);
  const int64_t channel_tiles = (channels + math::kTileChannels - 1) / math::kTileChannels;
  const int64_t tap_tiles = (kernel_size + math::kTileTaps - 1) / math::kTileTaps;
  at::Tensor partial = at::empty({batch, chunks, kernel_size, channels}, x.options());  // every entry written
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grouped_conv_backward_cuda", [&] {
    launch_blocks<Launcher>(batch * chunks * channel_tiles * tap_tiles, grouped_weight_grad_kernel<scalar_t>,
                            grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), mask_data(mask),
                            partial.data_ptr<scalar_t>(), length, channels, kernel_size, pad, chunks, chunk_length,
                            channel_tiles, tap_tiles);
  });
  grad_weight_per_channel = partial.sum(at::IntArrayRef{0, 1}).t().contiguous();  // [K, C] -> [C, K]
}

template <typename Launcher>
at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask) {
  return conv_tiles<Launcher>(x, kernels, dynamic_layout(x, kernels), at::Tensor(), kernels.size(3), pad, mask, false);
}

template <typename Launcher>
void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels) {
  grad_x =
      conv_tiles<Launcher>(grad, kernels, dynamic_layout(x, kernels), at::Tensor(), kernels.size(3), pad, mask, true);
  grad_kernels = at::empty_like(kernels);
  const int64_t row_tiles = row_tiles_of(x).row_tiles;
  const int64_t tap_tiles = (kernels.size(3) + math::kTileTaps - 1) / math::kTileTaps;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_conv_backward_cuda", [&] {
    launch_blocks<Launcher>(x.size(0) * kernels.size(2) * row_tiles * tap_tiles, dynamic_kernel_grad_kernel<scalar_t>,
                            grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), mask_data(mask),
                            grad_kernels.data_ptr<scalar_t>(), x.size(1), x.size(2), kernels.size(2), kernels.size(3),
                            pad, row_tiles, tap_tiles);
  });
}

template <typename Launcher>
at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads, int64_t length,
                         int64_t radius) {
  const at::Tensor& like = band.defined() ? band : beta;
  at::Tensor out = at::empty({batch, heads, length, length}, like.options());
  AT_DISPATCH_FLOATING_TYPES(like.scalar_type(), "relpos_expand_cuda", [&] {
    launch<Launcher>(out.numel(), relpos_expand_kernel<scalar_t>, data_or_null<scalar_t>(band),
                     data_or_null<scalar_t>(beta), out.data_ptr<scalar_t>(), heads, length, radius);
  });
  return out;
}

template <typename Launcher>
at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius) {
  const int64_t length = grad.size(3);
  at::Tensor band_grad = at::empty({grad.size(0), grad.size(1), length, 2 * radius + 1}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "relpos_reduce_cuda", [&] {
    launch_warps<Launcher>(grad.numel() / math::max64(length, 1), relpos_reduce_kernel<scalar_t>,
                           grad.data_ptr<scalar_t>(), band_grad.data_ptr<scalar_t>(), length, radius);
  });
  return band_grad;
}

}  // namespace cabert::kernels::cuda::impl

#undef CABERT_GRID_LOOP
#undef CABERT_WARP_LOOP
