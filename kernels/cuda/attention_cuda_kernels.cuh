// The tiled CUDA kernels of attention with banded relative-position biases (the formula and conventions of
// kernels/attention_kernels.h) and their host code, in one header that two compilers take: nvcc for
// kernels/cuda/attention_cuda.cu and the host compiler for tests/kernels/attention_cuda_emulated_test.cc, which
// includes tests/kernels/cuda_emulator.h first and runs these kernels on the CPU (the Launcher as in
// conv_cuda_kernels.cuh).
//
// FlashAttention's scheme on the CUDA cores (no tensor cores; float or double throughout), laid out as a SIMT
// matrix product: a block of 16 x 16 threads takes a tile of kTile rows of one (batch, head) (64 in float, 32 in
// double) and walks the other side's tiles of kTile. Each thread owns a G x G square of every tile (G = 16 bytes of
// T: 4 floats or 2 doubles): rows rg G .. rg G + G - 1 and columns cg G .. cg G + G - 1 (rg, cg < 16), so one
// product step reads one 16-byte vector per row and per column from shared memory for G x G multiply-adds. A row's
// 16 threads are 16 lanes of one warp and reduce with warp shuffles. Three kernels, nothing T x T in memory:
//   - forward, per query tile: online softmax over the key tiles; writes the output and the row log-sum-exp;
//   - query gradients, per query tile: recomputes each tile's probabilities from the log-sum-exp, dS = P (dP -
//     rowsum(dO o O)), accumulates dq and the query band's gradient row;
//   - key gradients, per key tile: the same tiles transposed, accumulating dk, dv and the key band's rows.
// Each gradient row belongs to one block and is summed in a fixed order: no atomics, so two runs give the same
// bits. The bands' entries are read where a score needs them; beyond the radius every key of a row reads the
// band's edge. Dropout: the reference's Philox mask on the [B, N, T, T] probabilities (kernels/dropout_kernels.h),
// regenerated in both backward kernels, so this route, the CPU kernel and the reference drop the same
// probabilities. A batch row whose keys are all masked is not taken (takes_tiles): the other routes handle it.
#pragma once

#if !defined(__CUDACC__) && !defined(CABERT_CUDA_EMULATION)
#error "kernels/cuda/attention_cuda_kernels.cuh: compile it with nvcc, or include tests/kernels/cuda_emulator.h first"
#endif

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/attention_types.h"
#include "kernels/conv_math.h"
#include "kernels/key_mask_facts.h"
#include "kernels/philox.h"

// Loops over a thread's rows, columns and output chunks have constant trip counts: unrolled on the device, so that
// the squares stay in registers. Every kernel here runs blocks of kThreads threads: the bound makes the compiler keep
// within the registers that a block of that size may take (65,536 per block). The shared tiles are read as 16-byte
// vectors, so they are 16-byte aligned.
#if defined(__CUDACC__)
#define CABERT_UNROLL _Pragma("unroll")
#define CABERT_TILE_KERNEL __global__ __launch_bounds__(256)
#define CABERT_SHARED_TILE __shared__ __align__(16)
#else
#define CABERT_UNROLL
#define CABERT_TILE_KERNEL __global__
#define CABERT_SHARED_TILE __shared__
#endif

namespace cabert::kernels::cuda::impl::tiles {

using std::exp;
using std::log;

constexpr int kSide = 16;  // threads along a tile's rows and along its columns
constexpr int kThreads = kSide * kSide;
constexpr int kChunk = 32;  // head dimensions per pass of the score products through shared memory
constexpr int kMaxHeadDim = 128;
static_assert(kThreads == 256, "CABERT_TILE_KERNEL's launch bound");
static_assert(32 % kSide == 0, "a row's threads are lanes of one warp");

// The tile shapes of element type T.
template <typename T>
struct Shape {
  static constexpr int kGroup = 16 / static_cast<int>(sizeof(T));  // a thread's rows and columns: one 16-byte vector
  static constexpr int kTile = kSide * kGroup;                     // a block's rows; the other side's tile
  // Row strides of the shared tiles, padded by a vector: [kTile][kTile] tiles (the weights of a product and the
  // rows it weighs), and chunk tiles [kTile][kChunk], whose rows are further skewed by a vector per group of kGroup
  // rows (chunk_offset), so that the 16 threads reading the rows cg G + b of a column group hit distinct banks.
  static constexpr int kStride = kTile + kGroup;
  static constexpr int kChunkStride = kChunk + kGroup;
  static constexpr int kChunkTileSize = kTile * kChunkStride + kTile;
  // Output columns (head dimensions) pass in chunks of kTile: the chunk counts of the kernels for heads of up to 64
  // and up to kMaxHeadDim.
  static constexpr int kNarrowChunks = (64 + kTile - 1) / kTile;
  static constexpr int kMaxChunks = (kMaxHeadDim + kTile - 1) / kTile;
  static_assert(kChunk % kGroup == 0 && kTile % kGroup == 0, "vectors tile the chunks");
  static_assert(kTile * kStride <= 2 * kChunkTileSize, "a rows tile fits in the two chunk tiles it replaces");
};

template <typename T>
CABERT_HOST_DEVICE int chunk_offset(int row) {
  return row * Shape<T>::kChunkStride + row / Shape<T>::kGroup * Shape<T>::kGroup;
}

// [B, N, T, d] with the last dimension contiguous.
template <typename T>
struct HeadRows {
  T* data;
  int64_t batch_stride, head_stride, row_stride;
  CABERT_HOST_DEVICE T* row(int64_t b, int64_t h, int64_t t) const {
    return data + b * batch_stride + h * head_stride + t * row_stride;
  }
};

template <typename T>
struct Problem {
  HeadRows<const T> q, k, v;
  const T* query_band;  // [B, N, T, 2n+1] contiguous, or nullptr
  const T* key_band;
  const bool* key_mask;  // [B, T] or nullptr
  int64_t batch, heads, length, dim, radius;
  T scale;
  float dropout_p;  // 0: no dropout
  T kept;           // 1 / (1 - p)
  uint64_t seed, offset;
};

// A thread's place in the tiles: rows rg G + a and columns cg G + b (a, b < G) of every tile.
struct Place {
  int rg, cg;
};
__device__ __forceinline__ Place place() {
  return {static_cast<int>(threadIdx.x) / kSide, static_cast<int>(threadIdx.x) % kSide};
}

template <typename T>
__device__ __forceinline__ T negative_infinity() {
  return -std::numeric_limits<T>::infinity();
}
template <typename T>
__device__ __forceinline__ T larger(T a, T b) {
  return a > b ? a : b;
}

// The reductions over a row's kSide threads (kSide consecutive lanes of one warp).
template <typename T>
__device__ __forceinline__ T row_max(T x) {
  for (int lane_mask = 1; lane_mask < kSide; lane_mask <<= 1) {
    x = larger(x, __shfl_xor_sync(0xffffffffu, x, lane_mask));
  }
  return x;
}
template <typename T>
__device__ __forceinline__ T row_sum(T x) {
  for (int lane_mask = 1; lane_mask < kSide; lane_mask <<= 1) x += __shfl_xor_sync(0xffffffffu, x, lane_mask);
  return x;
}

// to[0 .. G) = from[0 .. G): one 16-byte shared load on the device (from 16-byte aligned).
#if defined(__CUDACC__)
__device__ __forceinline__ void load_vector(float (&to)[4], const float* from) {
  const float4 v = *reinterpret_cast<const float4*>(from);
  to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
}
__device__ __forceinline__ void load_vector(double (&to)[2], const double* from) {
  const double2 v = *reinterpret_cast<const double2*>(from);
  to[0] = v.x, to[1] = v.y;
}
#else
template <typename T, int G>
void load_vector(T (&to)[G], const T* from) {
  for (int e = 0; e < G; ++e) to[e] = from[e];
}
#endif

// Fills a shared tile of Width columns with head dimensions c0 .. c0 + Width - 1 of rows first .. first + kTile - 1
// of one head, row r at row_offset(r), zero past the length or the head dimension (coalesced: a warp reads one
// row's consecutive elements).
template <int Width, typename T, typename RowOffset>
__device__ __forceinline__ void fill_tile(T* tile, RowOffset row_offset, const HeadRows<const T>& rows, int64_t b,
                                          int64_t h, int64_t first, int64_t length, int64_t c0, int64_t dim) {
  for (int e = threadIdx.x; e < Shape<T>::kTile * Width; e += kThreads) {
    const int r = e / Width, c = e % Width;
    const int64_t t = first + r;
    tile[row_offset(r) + c] = t < length && c0 + c < dim ? rows.row(b, h, t)[c0 + c] : T(0);
  }
}

// A chunk tile: kChunk head dimensions from c0, rows skewed (chunk_offset).
template <typename T>
__device__ void load_chunk(T* tile, const HeadRows<const T>& rows, int64_t b, int64_t h, int64_t first, int64_t length,
                           int64_t c0, int64_t dim) {
  fill_tile<kChunk>(
      tile, [](int r) { return chunk_offset<T>(r); }, rows, b, h, first, length, c0, dim);
}

// A [kTile][kTile] rows tile: kTile head dimensions from c0.
template <typename T>
__device__ void load_rows(T* tile, const HeadRows<const T>& rows, int64_t b, int64_t h, int64_t first, int64_t length,
                          int64_t c0, int64_t dim) {
  fill_tile<Shape<T>::kTile>(
      tile, [](int r) { return r * Shape<T>::kStride; }, rows, b, h, first, length, c0, dim);
}

// sums[a][b] += own row (rg G + a) . other row (cg G + b) over one chunk (two chunk tiles).
template <typename T, int G = Shape<T>::kGroup>
__device__ __forceinline__ void add_products(T (&sums)[G][G], const T* own, const T* other) {
  const Place at = place();
  for (int c = 0; c < kChunk; c += G) {
    T columns[G][G];
    CABERT_UNROLL for (int b = 0; b < G; ++b) load_vector(columns[b], other + chunk_offset<T>(at.cg * G + b) + c);
    CABERT_UNROLL for (int a = 0; a < G; ++a) {
      T row[G];
      load_vector(row, own + chunk_offset<T>(at.rg * G + a) + c);
      CABERT_UNROLL for (int b = 0; b < G; ++b) {
        CABERT_UNROLL for (int e = 0; e < G; ++e) sums[a][b] += row[e] * columns[b][e];
      }
    }
  }
}

// sums[a][b] += sum over the tile's columns j of weights[rg G + a][j] rows[j][cg G + b] ([kTile][kTile] tiles).
template <typename T, int G = Shape<T>::kGroup>
__device__ __forceinline__ void add_weighted_rows(T (&sums)[G][G], const T* weights, const T* rows) {
  constexpr int kStride = Shape<T>::kStride;
  const Place at = place();
  for (int j = 0; j < Shape<T>::kTile; j += G) {
    T w[G][G];
    CABERT_UNROLL for (int a = 0; a < G; ++a) load_vector(w[a], weights + (at.rg * G + a) * kStride + j);
    CABERT_UNROLL for (int e = 0; e < G; ++e) {
      T row[G];
      load_vector(row, rows + (j + e) * kStride + at.cg * G);
      CABERT_UNROLL for (int a = 0; a < G; ++a) {
        CABERT_UNROLL for (int b = 0; b < G; ++b) sums[a][b] += w[a][e] * row[b];
      }
    }
  }
}

// A thread's square into its place of a [kTile][kTile] weights tile (one 16-byte store per row on the device).
template <typename T, int G = Shape<T>::kGroup>
__device__ __forceinline__ void store_square(T* tile, const T (&square)[G][G]) {
  const Place at = place();
  CABERT_UNROLL for (int a = 0; a < G; ++a) {
    CABERT_UNROLL for (int b = 0; b < G; ++b) tile[(at.rg * G + a) * Shape<T>::kStride + at.cg * G + b] = square[a][b];
  }
}

// The square's products over the head, one chunk tile pair at a time: sums[a][b] = own rows own0 + rg G + a of
// `own_rows` . rows other0 + cg G + b of `other_rows` (barriers before each fill and before the products).
template <typename T, int G = Shape<T>::kGroup>
__device__ void head_products(T (&sums)[G][G], const Problem<T>& p, int64_t b, int64_t h,
                              const HeadRows<const T>& own_rows, int64_t own0, const HeadRows<const T>& other_rows,
                              int64_t other0, T* own_tile, T* other_tile) {
  CABERT_UNROLL for (int a = 0; a < G; ++a) { CABERT_UNROLL for (int c = 0; c < G; ++c) sums[a][c] = T(0); }
  for (int64_t c0 = 0; c0 < p.dim; c0 += kChunk) {
    __syncthreads();
    load_chunk(own_tile, own_rows, b, h, own0, p.length, c0, p.dim);
    load_chunk(other_tile, other_rows, b, h, other0, p.length, c0, p.dim);
    __syncthreads();
    add_products(sums, own_tile, other_tile);
  }
}

// Whether key j takes part in the softmax of an existing query (j inside the length and a real key).
template <typename T>
__device__ __forceinline__ bool is_key(const Problem<T>& p, int64_t b, int64_t j) {
  return j < p.length && math::is_real(math::mask_row(p.key_mask, b, p.length), j);
}

// s_ij from the product q_i . k_j.
template <typename T>
__device__ __forceinline__ T score(const Problem<T>& p, int64_t bh, int64_t i, int64_t j, T product) {
  const int64_t width = 2 * p.radius + 1;
  T s = p.scale * product;
  if (p.query_band != nullptr) s += p.query_band[(bh * p.length + i) * width + math::relative_index(i, j, p.radius)];
  if (p.key_band != nullptr) s += p.key_band[(bh * p.length + j) * width + math::relative_index(j, i, p.radius)];
  return s;
}

// z_ij / (1 - p) for the consecutive keys j .. j + G - 1 of query i: the reference's mask, element ((b N + h) T + i)
// T + j of the [B, N, T, T] probabilities. The indices are consecutive, so at most two Philox blocks serve them.
template <typename T, int G>
__device__ __forceinline__ void dropout_factors(T (&factors)[G], const Problem<T>& p, int64_t bh, int64_t i,
                                                int64_t j) {
  if (p.dropout_p <= 0) {
    for (T& f : factors) f = T(1);
    return;
  }
  const uint64_t first =
      static_cast<uint64_t>(bh * p.length + i) * static_cast<uint64_t>(p.length) + static_cast<uint64_t>(j);
  uint64_t block = first >> 2;
  philox::Words words = philox::block(p.seed, p.offset, block);
  CABERT_UNROLL for (int m = 0; m < G; ++m) {
    const uint64_t index = first + static_cast<uint64_t>(m);
    if (index >> 2 != block) {
      block = index >> 2;
      words = philox::block(p.seed, p.offset, block);
    }
    factors[m] = philox::uniform(philox::word(words, index & 3)) >= p.dropout_p ? p.kept : T(0);
  }
}

// A tile's score gradients into the band gradient rows of the block's own rows (a thread's square: own rows own +
// a, the other side's columns other + b): band_grad[row][r(row, other)] += score_grads[a][b], r the
// relative_index for both bands (the query band's rows pair with keys, the key band's with queries). Inside the
// radius a (row, r) pair has one element, which its thread adds; the edges r = 0 and 2 radius sum a run of
// elements, in a fixed order: the thread's own, then across the row's threads (shuffles), added by the first.
template <typename T, int G = Shape<T>::kGroup>
__device__ __forceinline__ void add_band_grads(T* band_grad, const T (&score_grads)[G][G], const Problem<T>& p,
                                               int64_t bh, int64_t own, int64_t other) {
  if (band_grad == nullptr) return;
  const int64_t width = 2 * p.radius + 1;
  CABERT_UNROLL for (int a = 0; a < G; ++a) {
    const int64_t row = own + a;
    T* band_row = band_grad + (bh * p.length + math::min64(row, p.length - 1)) * width;
    T first_edge = T(0), last_edge = T(0);
    CABERT_UNROLL for (int b = 0; b < G; ++b) {
      const int64_t r = math::relative_index(row, other + b, p.radius);
      if (r == 0) {
        first_edge += score_grads[a][b];
      } else if (r == width - 1) {
        last_edge += score_grads[a][b];
      } else if (row < p.length && other + b < p.length) {
        band_row[r] += score_grads[a][b];
      }
    }
    first_edge = row_sum(first_edge);
    last_edge = row_sum(last_edge);
    if (threadIdx.x % kSide == 0 && row < p.length) {
      band_row[0] += first_edge;
      if (width > 1) band_row[width - 1] += last_edge;
    }
  }
}

// Writes a thread's head columns of its rows rows0 + a (below the length): sums[chunk][a][b] factor[a] into
// head column chunk kTile + cg G + b (below the head size) of out [B, T, N, d] (heads last).
template <typename T, int Chunks, int G = Shape<T>::kGroup>
__device__ __forceinline__ void store_rows(T* out, const T (&sums)[Chunks][G][G], const T (&factor)[G],
                                           const Problem<T>& p, int64_t b, int64_t h, int64_t rows0) {
  const Place at = place();
  CABERT_UNROLL for (int a = 0; a < G; ++a) {
    const int64_t t = rows0 + a;
    if (t >= p.length) continue;
    T* row = out + ((b * p.length + t) * p.heads + h) * p.dim;
    CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
      CABERT_UNROLL for (int c = 0; c < G; ++c) {
        const int64_t column = int64_t(chunk) * Shape<T>::kTile + at.cg * G + c;
        if (column < p.dim) row[column] = sums[chunk][a][c] * factor[a];
      }
    }
  }
}

// sums[chunk] += weights (a [kTile][kTile] tile) x rows first .. of `rows`, head columns chunk kTile .. : one
// rows tile per chunk of the head, in `tile` (barriers before each fill and before the products).
template <typename T, int Chunks, int G = Shape<T>::kGroup>
__device__ __forceinline__ void add_weighted_head(T (&sums)[Chunks][G][G], const Problem<T>& p, const T* weights,
                                                  const HeadRows<const T>& rows, int64_t b, int64_t h, int64_t first,
                                                  T* tile) {
  CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
    if (int64_t(chunk) * Shape<T>::kTile >= p.dim) break;
    __syncthreads();
    load_rows(tile, rows, b, h, first, p.length, int64_t(chunk) * Shape<T>::kTile, p.dim);
    __syncthreads();
    add_weighted_rows(sums[chunk], weights, tile);
  }
}

template <typename T, int Chunks, int G = Shape<T>::kGroup>
__device__ __forceinline__ void clear(T (&sums)[Chunks][G][G]) {
  CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
    CABERT_UNROLL for (int a = 0; a < G; ++a) { CABERT_UNROLL for (int b = 0; b < G; ++b) sums[chunk][a][b] = T(0); }
  }
}

// out [B, T, N, d] (heads last), logsumexp [B, N, T].
template <typename T, int Chunks>
CABERT_TILE_KERNEL void forward_kernel(int64_t items, Problem<T> p, T* out, T* logsumexp) {
  using S = Shape<T>;
  constexpr int G = S::kGroup;
  // Two chunk tiles (q and k) for the scores, then one rows tile (v); the dropped probabilities.
  CABERT_SHARED_TILE T chunks[2 * S::kChunkTileSize];
  CABERT_SHARED_TILE T probabilities[S::kTile * S::kStride];
  const Place at = place();
  const int64_t tiles = (p.length + S::kTile - 1) / S::kTile;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, i0 = item % tiles * S::kTile;
    const int64_t rows0 = i0 + at.rg * G;
    T sums[Chunks][G][G];
    clear(sums);
    T running_max[G], running_sum[G];
    for (int a = 0; a < G; ++a) running_max[a] = negative_infinity<T>(), running_sum[a] = T(0);
    for (int64_t j0 = 0; j0 < p.length; j0 += S::kTile) {
      const int64_t columns0 = j0 + at.cg * G;
      T scores[G][G];
      head_products(scores, p, b, h, p.q, i0, p.k, j0, chunks, chunks + S::kChunkTileSize);
      bool real[G];
      for (int c = 0; c < G; ++c) real[c] = is_key(p, b, columns0 + c);
      T dropped[G][G], rescale[G];
      CABERT_UNROLL for (int a = 0; a < G; ++a) {
        const int64_t i = rows0 + a;
        T tile_max = negative_infinity<T>();
        CABERT_UNROLL for (int c = 0; c < G; ++c) {
          scores[a][c] = i < p.length && real[c] ? score(p, bh, i, columns0 + c, scores[a][c]) : negative_infinity<T>();
          tile_max = larger(tile_max, scores[a][c]);
        }
        const T new_max = larger(running_max[a], row_max(tile_max));
        rescale[a] = running_max[a] == negative_infinity<T>() ? T(0) : exp(running_max[a] - new_max);
        T factors[G];
        dropout_factors(factors, p, bh, i, columns0);
        T tile_sum = T(0);
        CABERT_UNROLL for (int c = 0; c < G; ++c) {
          const T e = scores[a][c] == negative_infinity<T>() ? T(0) : exp(scores[a][c] - new_max);
          tile_sum += e;
          dropped[a][c] = e * factors[c];
        }
        running_sum[a] = running_sum[a] * rescale[a] + row_sum(tile_sum);
        running_max[a] = new_max;
      }
      CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
        CABERT_UNROLL for (int a = 0; a < G; ++a) {
          CABERT_UNROLL for (int c = 0; c < G; ++c) sums[chunk][a][c] *= rescale[a];
        }
      }
      // Every thread passed head_products' first barrier after reading the previous tile's probabilities.
      store_square(probabilities, dropped);
      add_weighted_head(sums, p, probabilities, p.v, b, h, j0, chunks);
    }
    T inverse[G];
    for (int a = 0; a < G; ++a) inverse[a] = T(1) / running_sum[a];
    store_rows(out, sums, inverse, p, b, h, rows0);
    if (at.cg == 0) {
      for (int a = 0; a < G; ++a) {
        if (rows0 + a < p.length) logsumexp[bh * p.length + rows0 + a] = running_max[a] + log(running_sum[a]);
      }
    }
  }
}

// The backward's extra inputs: the output gradient, the row log-sum-exp and rowsum(dO o O), [B, N, T] contiguous.
template <typename T>
struct GradientInputs {
  HeadRows<const T> grad_out;
  const T* logsumexp;
  const T* delta;
};

// Both backward kernels' products for the tiles of own rows own0 .. and other rows other0 ..: products q_i . k_j and
// grad_products dO_i . v_j, a thread's rows the block's own (queries when own_queries, else keys), its columns the
// other side's; `chunks` holds two chunk tiles.
template <typename T, int G>
__device__ __forceinline__ void backward_products(T (&products)[G][G], T (&grad_products)[G][G], const Problem<T>& p,
                                                  const GradientInputs<T>& g, int64_t b, int64_t h, int64_t own0,
                                                  int64_t other0, bool own_queries, T* chunks) {
  T* const other_tile = chunks + Shape<T>::kChunkTileSize;
  if (own_queries) {
    head_products(products, p, b, h, p.q, own0, p.k, other0, chunks, other_tile);
    head_products(grad_products, p, b, h, g.grad_out, own0, p.v, other0, chunks, other_tile);
  } else {
    head_products(products, p, b, h, p.k, own0, p.q, other0, chunks, other_tile);
    head_products(grad_products, p, b, h, p.v, own0, g.grad_out, other0, chunks, other_tile);
  }
}

// dq [B, T, N, d] (heads last); query_band_grad [B, N, T, 2n+1] zeroed, or nullptr.
template <typename T, int Chunks>
CABERT_TILE_KERNEL void query_grad_kernel(int64_t items, Problem<T> p, GradientInputs<T> g, T* grad_q,
                                          T* query_band_grad) {
  using S = Shape<T>;
  constexpr int G = S::kGroup;
  CABERT_SHARED_TILE T chunks[2 * S::kChunkTileSize];  // chunk tiles for the products, then a rows tile of k
  CABERT_SHARED_TILE T score_grads[S::kTile * S::kStride];
  const Place at = place();
  const int64_t tiles = (p.length + S::kTile - 1) / S::kTile;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, i0 = item % tiles * S::kTile;
    const int64_t rows0 = i0 + at.rg * G;
    T lse[G], delta[G];
    for (int a = 0; a < G; ++a) {
      const bool inside = rows0 + a < p.length;
      lse[a] = inside ? g.logsumexp[bh * p.length + rows0 + a] : T(0);
      delta[a] = inside ? g.delta[bh * p.length + rows0 + a] : T(0);
    }
    T sums[Chunks][G][G];
    clear(sums);
    for (int64_t j0 = 0; j0 < p.length; j0 += S::kTile) {
      const int64_t columns0 = j0 + at.cg * G;
      T products[G][G], grad_products[G][G];
      backward_products(products, grad_products, p, g, b, h, i0, j0, true, chunks);
      bool real[G];
      for (int c = 0; c < G; ++c) real[c] = is_key(p, b, columns0 + c);
      T ds[G][G];
      CABERT_UNROLL for (int a = 0; a < G; ++a) {
        const int64_t i = rows0 + a;
        T factors[G];
        dropout_factors(factors, p, bh, i, columns0);
        CABERT_UNROLL for (int c = 0; c < G; ++c) {
          ds[a][c] = T(0);
          if (i < p.length && real[c]) {
            const T probability = exp(score(p, bh, i, columns0 + c, products[a][c]) - lse[a]);
            ds[a][c] = probability * (grad_products[a][c] * factors[c] - delta[a]);
          }
        }
      }
      // Every thread passed head_products' first barrier after reading the previous tile's score gradients.
      store_square(score_grads, ds);
      add_band_grads(query_band_grad, ds, p, bh, rows0, columns0);
      add_weighted_head(sums, p, score_grads, p.k, b, h, j0, chunks);
    }
    T scale[G];
    for (T& s : scale) s = p.scale;
    store_rows(grad_q, sums, scale, p, b, h, rows0);
  }
}

// dk, dv [B, T, N, d] (heads last); key_band_grad [B, N, T, 2n+1] zeroed, or nullptr. The tiles are the query
// kernel's transposed: a block's rows are keys j, a thread's columns queries i.
template <typename T, int Chunks>
CABERT_TILE_KERNEL void key_grad_kernel(int64_t items, Problem<T> p, GradientInputs<T> g, T* grad_k, T* grad_v,
                                        T* key_band_grad) {
  using S = Shape<T>;
  constexpr int G = S::kGroup;
  CABERT_SHARED_TILE T chunks[2 * S::kChunkTileSize];   // chunk tiles for the products, then rows tiles of q, dO
  CABERT_SHARED_TILE T weights[S::kTile * S::kStride];  // the score gradients, then the dropped probabilities
  const Place at = place();
  const int64_t tiles = (p.length + S::kTile - 1) / S::kTile;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, j0 = item % tiles * S::kTile;
    const int64_t rows0 = j0 + at.rg * G;
    bool real[G];
    for (int a = 0; a < G; ++a) real[a] = is_key(p, b, rows0 + a);
    T key_sums[Chunks][G][G], value_sums[Chunks][G][G];
    clear(key_sums);
    clear(value_sums);
    for (int64_t i0 = 0; i0 < p.length; i0 += S::kTile) {
      const int64_t columns0 = i0 + at.cg * G;
      T products[G][G], grad_products[G][G];
      backward_products(products, grad_products, p, g, b, h, j0, i0, false, chunks);
      T ds[G][G], pz[G][G];
      CABERT_UNROLL for (int c = 0; c < G; ++c) {
        const int64_t i = columns0 + c;
        const bool query = i < p.length;
        const T lse = query ? g.logsumexp[bh * p.length + i] : T(0);
        const T delta = query ? g.delta[bh * p.length + i] : T(0);
        T factors[G];  // of keys rows0 .. rows0 + G - 1, consecutive in the mask's indexing
        dropout_factors(factors, p, bh, i, rows0);
        CABERT_UNROLL for (int a = 0; a < G; ++a) {
          ds[a][c] = pz[a][c] = T(0);
          if (query && real[a]) {
            const T probability = exp(score(p, bh, i, rows0 + a, products[a][c]) - lse);
            ds[a][c] = probability * (grad_products[a][c] * factors[a] - delta);
            pz[a][c] = probability * factors[a];
          }
        }
      }
      // Every thread passed head_products' first barrier after reading the previous tile's probabilities.
      store_square(weights, ds);
      add_band_grads(key_band_grad, ds, p, bh, rows0, columns0);
      add_weighted_head(key_sums, p, weights, p.q, b, h, i0, chunks);
      __syncthreads();  // every thread's products read the score gradients
      store_square(weights, pz);
      add_weighted_head(value_sums, p, weights, g.grad_out, b, h, i0, chunks);
    }
    T scale[G], one[G];
    for (int a = 0; a < G; ++a) scale[a] = p.scale, one[a] = T(1);
    store_rows(grad_k, key_sums, scale, p, b, h, rows0);
    store_rows(grad_v, value_sums, one, p, b, h, rows0);
  }
}

// ---- host code ----

template <typename T>
HeadRows<const T> head_rows(const at::Tensor& x) {
  return {x.const_data_ptr<T>(), x.stride(0), x.stride(1), x.stride(2)};
}

// The bands' pointers are read as contiguous [B, N, T, 2n+1]: `in` holds contiguous bands (with_contiguous_bands).
template <typename T>
Problem<T> problem_of(const AttentionInputs& in) {
  Problem<T> p;
  p.q = head_rows<T>(in.q);
  p.k = head_rows<T>(in.k);
  p.v = head_rows<T>(in.v);
  p.query_band = in.query_band.defined() ? in.query_band.const_data_ptr<T>() : nullptr;
  p.key_band = in.key_band.defined() ? in.key_band.const_data_ptr<T>() : nullptr;
  p.key_mask = in.key_mask.defined() ? in.key_mask.const_data_ptr<bool>() : nullptr;
  p.batch = in.q.size(0);
  p.heads = in.q.size(1);
  p.length = in.q.size(2);
  p.dim = in.q.size(3);
  p.radius = in.radius;
  p.scale = static_cast<T>(in.scale);
  p.dropout_p = static_cast<float>(in.dropout.p);
  p.kept = static_cast<T>(1.0 / (1.0 - in.dropout.p));
  p.seed = in.dropout.seed;
  p.offset = in.dropout.offset;
  return p;
}

// The bands as the kernels read them: checked inputs have contiguous bands, but a query band of beta alone
// (kernels/relative_bands.h) is an expanded view.
inline AttentionInputs with_contiguous_bands(const AttentionInputs& in) {
  AttentionInputs c = in;
  if (c.query_band.defined()) c.query_band = c.query_band.contiguous();
  if (c.key_band.defined()) c.key_band = c.key_band.contiguous();
  return c;
}

// Whether the tiles take these (checked, banded) inputs: float or double, a head size up to kMaxHeadDim, and
// every batch row with a real key (kernels/key_mask_facts.h).
inline bool takes_tiles(const AttentionInputs& in) {
  const int64_t d = in.q.size(3);
  if (d < 1 || d > kMaxHeadDim || in.weights.any()) return false;
  if (in.q.scalar_type() != at::kFloat && in.q.scalar_type() != at::kDouble) return false;
  return !in.key_mask.defined() || !key_mask_facts(in.key_mask).keyless_row;
}

template <typename Launcher>
int grid_of(int64_t items) {
  return static_cast<int>(math::min64(items, Launcher::kMaxBlocks));
}

// The blocks of a launch: one per tile of rows of every (batch, head).
template <typename T>
int64_t items_of(const at::Tensor& q) {
  return q.size(0) * q.size(1) * ((q.size(2) + Shape<T>::kTile - 1) / Shape<T>::kTile);
}

// Runs body(std::integral_constant<int, Chunks>) with the chunk count of the head size (q's last dimension): the
// kernels for heads of up to 64, or up to kMaxHeadDim.
template <typename T, typename Body>
void with_chunks(int64_t dim, Body&& body) {
  if (dim <= 64) {
    body(std::integral_constant<int, Shape<T>::kNarrowChunks>());
  } else {
    body(std::integral_constant<int, Shape<T>::kMaxChunks>());
  }
}

// Inputs checked and banded (kernels/attention_kernels.cc), taken (takes_tiles).
template <typename Launcher>
AttentionOutputs forward(const AttentionInputs& inputs) {
  const AttentionInputs in = with_contiguous_bands(inputs);
  AttentionOutputs result;
  result.out = heads_last_empty(in.q);
  result.logsumexp = at::empty({in.q.size(0), in.q.size(1), in.q.size(2)}, in.q.options());
  result.tiled = true;
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "tiled_attention_forward", [&] {
    const int64_t items = items_of<scalar_t>(in.q);
    if (items == 0) return;
    with_chunks<scalar_t>(in.q.size(3), [&](auto chunks) {
      constexpr int Chunks = decltype(chunks)::value;
      Launcher::run(grid_of<Launcher>(items), kThreads, forward_kernel<scalar_t, Chunks>, items,
                    problem_of<scalar_t>(in), result.out.data_ptr<scalar_t>(), result.logsumexp.data_ptr<scalar_t>());
    });
  });
  return result;
}

// grad_out with a contiguous last dimension; forward: this route's outputs.
template <typename Launcher>
AttentionGrads backward(const at::Tensor& grad_out, const AttentionInputs& inputs, const AttentionOutputs& forward) {
  const AttentionInputs in = with_contiguous_bands(inputs);
  AttentionGrads grads;
  grads.q = heads_last_empty(in.q);
  grads.k = heads_last_empty(in.q);
  grads.v = heads_last_empty(in.q);
  if (in.query_band.defined()) grads.query_band = at::zeros(in.query_band.sizes(), in.q.options());
  if (in.key_band.defined()) grads.key_band = at::zeros(in.key_band.sizes(), in.q.options());
  if (in.q.numel() == 0) return grads;
  const at::Tensor delta = (grad_out * forward.out).sum(-1).contiguous();  // rowsum(dO o O)
  const at::Tensor logsumexp = forward.logsumexp.contiguous();
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "tiled_attention_backward", [&] {
    const int64_t items = items_of<scalar_t>(in.q);
    const Problem<scalar_t> p = problem_of<scalar_t>(in);
    const GradientInputs<scalar_t> g{head_rows<scalar_t>(grad_out), logsumexp.const_data_ptr<scalar_t>(),
                                     delta.const_data_ptr<scalar_t>()};
    auto band = [](at::Tensor& t) { return t.defined() ? t.data_ptr<scalar_t>() : nullptr; };
    with_chunks<scalar_t>(in.q.size(3), [&](auto chunks) {
      constexpr int Chunks = decltype(chunks)::value;
      Launcher::run(grid_of<Launcher>(items), kThreads, query_grad_kernel<scalar_t, Chunks>, items, p, g,
                    grads.q.data_ptr<scalar_t>(), band(grads.query_band));
      Launcher::run(grid_of<Launcher>(items), kThreads, key_grad_kernel<scalar_t, Chunks>, items, p, g,
                    grads.k.data_ptr<scalar_t>(), grads.v.data_ptr<scalar_t>(), band(grads.key_band));
    });
  });
  return grads;
}

}  // namespace cabert::kernels::cuda::impl::tiles
