// The tiled CUDA kernels of attention with banded relative-position biases (the formula and conventions of
// kernels/attention_kernels.h) and their host code, in one header that two compilers take: nvcc for
// kernels/cuda/attention_cuda.cu and the host compiler for tests/kernels/attention_cuda_emulated_test.cc, which
// includes tests/kernels/cuda_emulator.h first and runs these kernels on the CPU (the Launcher as in
// conv_cuda_kernels.cuh).
//
// FlashAttention's scheme without tensor cores (float or double throughout): one block of 256 threads per tile of
// 32 rows of one (batch, head), walking the other side's tiles of 32; the head dimension passes through shared
// memory in chunks of 32 (up to kMaxHeadDim); the 32 x 32 scores of a tile give each thread 4 consecutive columns
// of one row, a row's 8 threads reducing with warp shuffles. Three kernels, nothing T x T in memory:
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

#include "kernels/attention_kernels.h"
#include "kernels/conv_math.h"
#include "kernels/key_mask_facts.h"
#include "kernels/philox.h"

// Loops over the head's chunks run at most Chunks times (a kernel's template argument: 2 up to a head size of 64,
// else kMaxChunks): unrolled on the device, so that the accumulators stay in registers, as many as the head needs.
// Every kernel here runs blocks of kThreads threads: the bound makes the compiler keep within the registers
// that a block of that size may take (65,536 per block).
#if defined(__CUDACC__)
#define CABERT_UNROLL _Pragma("unroll")
#define CABERT_TILE_KERNEL __global__ __launch_bounds__(256)
#else
#define CABERT_UNROLL
#define CABERT_TILE_KERNEL __global__
#endif

namespace cabert::kernels::cuda::impl::tiles {

using std::exp;
using std::log;

constexpr int kThreads = 256;
constexpr int kRows = 32;                       // a block's own rows: queries (forward, dq) or keys (dk, dv)
constexpr int kCols = 32;                       // the other side's tile
constexpr int kChunk = 32;                      // head dimensions per pass through shared memory
constexpr int kLanes = kThreads / kRows;        // threads per row
constexpr int kPerLane = kCols / kLanes;        // a thread's columns of the score tile: lane kPerLane + m
constexpr int kChunkPerLane = kChunk / kLanes;  // a thread's head dimensions of a chunk: lane + kLanes c
constexpr int kMaxHeadDim = 128;
constexpr int kMaxChunks = kMaxHeadDim / kChunk;
constexpr int kNarrowChunks = 2;     // the kernels for heads of up to 64
constexpr int kStride = kChunk + 1;  // shared rows padded against bank conflicts
static_assert(kRows == kCols && kChunk == kCols && kLanes * kRows == kThreads && 32 % kLanes == 0, "tile shape");
static_assert(kThreads == 256, "CABERT_TILE_KERNEL's launch bound");

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

template <typename T>
__device__ __forceinline__ T negative_infinity() {
  return -std::numeric_limits<T>::infinity();
}
template <typename T>
__device__ __forceinline__ T larger(T a, T b) {
  return a > b ? a : b;
}

// The row's reductions over its kLanes threads (consecutive lanes of one warp).
template <typename T>
__device__ __forceinline__ T row_max(T x) {
  for (int lane_mask = 1; lane_mask < kLanes; lane_mask <<= 1) {
    x = larger(x, __shfl_xor_sync(0xffffffffu, x, lane_mask));
  }
  return x;
}
template <typename T>
__device__ __forceinline__ T row_sum(T x) {
  for (int lane_mask = 1; lane_mask < kLanes; lane_mask <<= 1) x += __shfl_xor_sync(0xffffffffu, x, lane_mask);
  return x;
}

// Fills a kRows x kChunk shared tile with head dimensions c0 .. c0 + kChunk - 1 of rows first .. first + kRows - 1
// of one head, zero past the length or the head dimension (coalesced: consecutive threads, consecutive columns).
template <typename T>
__device__ void load_chunk(T* tile, const HeadRows<const T>& rows, int64_t b, int64_t h, int64_t first, int64_t length,
                           int64_t c0, int64_t dim) {
  for (int e = threadIdx.x; e < kRows * kChunk; e += kThreads) {
    const int r = e / kChunk, c = e % kChunk;
    const int64_t t = first + r;
    tile[r * kStride + c] = t < length && c0 + c < dim ? rows.row(b, h, t)[c0 + c] : T(0);
  }
}

// sums[m] += own row . other row (lane kPerLane + m) over one chunk.
template <typename T>
__device__ __forceinline__ void add_products(T (&sums)[kPerLane], const T* own, const T* other) {
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  for (int c = 0; c < kChunk; ++c) {
    const T a = own[r * kStride + c];
    for (int m = 0; m < kPerLane; ++m) sums[m] += a * other[(lane * kPerLane + m) * kStride + c];
  }
}

// accumulators[base + c] += sum over the tile's columns j of weights[r][j] other[j][lane + kLanes c].
template <typename T>
__device__ __forceinline__ void add_weighted_rows(T* accumulators, const T* weights, const T* other, T factor) {
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  for (int c = 0; c < kChunkPerLane; ++c) {
    T sum = T(0);
    for (int j = 0; j < kCols; ++j) sum += weights[r * kStride + j] * other[j * kStride + lane + kLanes * c];
    accumulators[c] += factor * sum;
  }
}

// Whether key j takes part in query i's softmax (both inside the length, j a real key).
template <typename T>
__device__ __forceinline__ bool takes_part(const Problem<T>& p, int64_t b, int64_t i, int64_t j) {
  return i < p.length && j < p.length && math::is_real(math::mask_row(p.key_mask, b, p.length), j);
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

// z_ij / (1 - p): the reference's mask, element ((b N + h) T + i) T + j of the [B, N, T, T] probabilities (the key
// kernel's; the others draw a row's four columns at once, row_dropout_factors).
template <typename T>
__device__ __forceinline__ T dropout_factor(const Problem<T>& p, int64_t bh, int64_t i, int64_t j) {
  if (p.dropout_p <= 0) return T(1);
  const uint64_t index =
      static_cast<uint64_t>(bh * p.length + i) * static_cast<uint64_t>(p.length) + static_cast<uint64_t>(j);
  return philox::keep(p.seed, p.offset, index, p.dropout_p) ? p.kept : T(0);
}

// dropout_factor of the consecutive keys j .. j + kPerLane - 1 of query i (a thread's columns in the forward and the
// query kernel): their indices are consecutive, so at most two Philox blocks serve the four.
template <typename T>
__device__ __forceinline__ void row_dropout_factors(T (&factors)[kPerLane], const Problem<T>& p, int64_t bh, int64_t i,
                                                    int64_t j) {
  if (p.dropout_p <= 0) {
    for (T& f : factors) f = T(1);
    return;
  }
  const uint64_t first =
      static_cast<uint64_t>(bh * p.length + i) * static_cast<uint64_t>(p.length) + static_cast<uint64_t>(j);
  uint64_t block = first >> 2;
  philox::Words words = philox::block(p.seed, p.offset, block);
  for (int m = 0; m < kPerLane; ++m) {
    const uint64_t index = first + static_cast<uint64_t>(m);
    if (index >> 2 != block) {
      block = index >> 2;
      words = philox::block(p.seed, p.offset, block);
    }
    factors[m] = philox::uniform(words.w[index & 3]) >= p.dropout_p ? p.kept : T(0);
  }
}

// Writes a thread's head columns of one row: sums[chunk kChunkPerLane + c] / divisor into row[chunk kChunk + lane +
// kLanes c] below the head size.
template <typename T, int Chunks>
__device__ __forceinline__ void store_row(T* row, const T (&sums)[Chunks * kChunkPerLane], T divisor, int64_t dim) {
  const int lane = threadIdx.x % kLanes;
  CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
    for (int c = 0; c < kChunkPerLane; ++c) {
      const int64_t column = int64_t(chunk) * kChunk + lane + kLanes * c;
      if (column < dim) row[column] = sums[chunk * kChunkPerLane + c] / divisor;
    }
  }
}

// A tile's score gradients into the band gradient rows of the block's own rows own0 .. (one thread per row, the
// other side's columns other0 .. in order): band_grad[row][r(row, other)] += score_grads[row - own0][other - other0].
// The query band's rows pair with keys, the key band's with queries; r is relative_index(row, other) for both.
template <typename T>
__device__ __forceinline__ void add_band_grads(T* band_grad, const T* score_grads, const Problem<T>& p, int64_t bh,
                                               int64_t own0, int64_t other0) {
  if (band_grad == nullptr || threadIdx.x >= kRows || own0 + threadIdx.x >= p.length) return;
  const int64_t row = own0 + threadIdx.x;
  T* band_row = band_grad + (bh * p.length + row) * (2 * p.radius + 1);
  for (int other = 0; other < kCols && other0 + other < p.length; ++other) {
    band_row[math::relative_index(row, other0 + other, p.radius)] += score_grads[threadIdx.x * kStride + other];
  }
}

// out [B, T, N, d] (heads last), logsumexp [B, N, T].
template <typename T, int Chunks>
CABERT_TILE_KERNEL void forward_kernel(int64_t items, Problem<T> p, T* out, T* logsumexp) {
  __shared__ T own[kRows * kStride], other[kCols * kStride], probabilities[kRows * kStride];
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t tiles = (p.length + kRows - 1) / kRows;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, i0 = item % tiles * kRows, i = i0 + r;
    T accumulators[Chunks * kChunkPerLane];
    for (T& a : accumulators) a = T(0);
    T running_max = negative_infinity<T>(), running_sum = T(0);
    for (int64_t j0 = 0; j0 < p.length; j0 += kCols) {
      T products[kPerLane] = {};
      for (int64_t c0 = 0; c0 < p.dim; c0 += kChunk) {
        __syncthreads();
        load_chunk(own, p.q, b, h, i0, p.length, c0, p.dim);
        load_chunk(other, p.k, b, h, j0, p.length, c0, p.dim);
        __syncthreads();
        add_products(products, own, other);
      }
      T scores[kPerLane], factors[kPerLane], tile_max = negative_infinity<T>();
      row_dropout_factors(factors, p, bh, i, j0 + lane * kPerLane);
      for (int m = 0; m < kPerLane; ++m) {
        const int64_t j = j0 + lane * kPerLane + m;
        scores[m] = takes_part(p, b, i, j) ? score(p, bh, i, j, products[m]) : negative_infinity<T>();
        tile_max = larger(tile_max, scores[m]);
      }
      const T new_max = larger(running_max, row_max(tile_max));
      const T rescale = running_max == negative_infinity<T>() ? T(0) : exp(running_max - new_max);
      T tile_sum = T(0);
      for (int m = 0; m < kPerLane; ++m) {
        const T e = scores[m] == negative_infinity<T>() ? T(0) : exp(scores[m] - new_max);
        tile_sum += e;
        probabilities[r * kStride + lane * kPerLane + m] = e * factors[m];
      }
      running_sum = running_sum * rescale + row_sum(tile_sum);
      running_max = new_max;
      for (T& a : accumulators) a *= rescale;
      CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
        if (int64_t(chunk) * kChunk >= p.dim) break;
        __syncthreads();  // the probabilities written, the previous chunk of V read
        load_chunk(other, p.v, b, h, j0, p.length, int64_t(chunk) * kChunk, p.dim);
        __syncthreads();
        add_weighted_rows(accumulators + chunk * kChunkPerLane, probabilities, other, T(1));
      }
    }
    if (i < p.length) {
      store_row<T, Chunks>(out + ((b * p.length + i) * p.heads + h) * p.dim, accumulators, running_sum, p.dim);
      if (lane == 0) logsumexp[bh * p.length + i] = running_max + log(running_sum);
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

// Both backward kernels' products for queries i0 .. and keys j0 ..: products q_i . k_j and grad_products
// dO_i . v_j, a thread's row the block's own (a query when own_queries, else a key) and its columns the other side's.
template <typename T>
__device__ __forceinline__ void backward_products(T (&products)[kPerLane], T (&grad_products)[kPerLane],
                                                  const Problem<T>& p, const GradientInputs<T>& g, int64_t b, int64_t h,
                                                  int64_t i0, int64_t j0, bool own_queries, T* queries, T* keys,
                                                  T* grads, T* values) {
  for (int64_t c0 = 0; c0 < p.dim; c0 += kChunk) {
    __syncthreads();
    load_chunk(queries, p.q, b, h, i0, p.length, c0, p.dim);
    load_chunk(keys, p.k, b, h, j0, p.length, c0, p.dim);
    load_chunk(grads, g.grad_out, b, h, i0, p.length, c0, p.dim);
    load_chunk(values, p.v, b, h, j0, p.length, c0, p.dim);
    __syncthreads();
    if (own_queries) {
      add_products(products, queries, keys);
      add_products(grad_products, grads, values);
    } else {
      add_products(products, keys, queries);
      add_products(grad_products, values, grads);
    }
  }
}

// dq [B, T, N, d] (heads last); query_band_grad [B, N, T, 2n+1] zeroed, or nullptr.
template <typename T, int Chunks>
CABERT_TILE_KERNEL void query_grad_kernel(int64_t items, Problem<T> p, GradientInputs<T> g, T* grad_q,
                                          T* query_band_grad) {
  __shared__ T queries[kRows * kStride], keys[kCols * kStride], grads[kRows * kStride], values[kCols * kStride],
      score_grads[kRows * kStride];
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t tiles = (p.length + kRows - 1) / kRows;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, i0 = item % tiles * kRows, i = i0 + r;
    const T lse = i < p.length ? g.logsumexp[bh * p.length + i] : T(0);
    const T delta = i < p.length ? g.delta[bh * p.length + i] : T(0);
    T accumulators[Chunks * kChunkPerLane];
    for (T& a : accumulators) a = T(0);
    for (int64_t j0 = 0; j0 < p.length; j0 += kCols) {
      T products[kPerLane] = {}, grad_products[kPerLane] = {};
      backward_products(products, grad_products, p, g, b, h, i0, j0, true, queries, keys, grads, values);
      T factors[kPerLane];
      row_dropout_factors(factors, p, bh, i, j0 + lane * kPerLane);
      for (int m = 0; m < kPerLane; ++m) {
        const int64_t j = j0 + lane * kPerLane + m;
        T ds = T(0);
        if (takes_part(p, b, i, j)) {
          const T probability = exp(score(p, bh, i, j, products[m]) - lse);
          ds = probability * (grad_products[m] * factors[m] - delta);
        }
        score_grads[r * kStride + lane * kPerLane + m] = ds;
      }
      CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
        if (int64_t(chunk) * kChunk >= p.dim) break;
        __syncthreads();  // the score gradients written, the previous chunk of K read
        load_chunk(keys, p.k, b, h, j0, p.length, int64_t(chunk) * kChunk, p.dim);
        __syncthreads();
        add_weighted_rows(accumulators + chunk * kChunkPerLane, score_grads, keys, p.scale);
      }
      // The next tile's barriers come before its score gradients are overwritten.
      add_band_grads(query_band_grad, score_grads, p, bh, i0, j0);
    }
    if (i < p.length)
      store_row<T, Chunks>(grad_q + ((b * p.length + i) * p.heads + h) * p.dim, accumulators, T(1), p.dim);
  }
}

// dk, dv [B, T, N, d] (heads last); key_band_grad [B, N, T, 2n+1] zeroed, or nullptr. The tiles are the query
// kernel's transposed: a block's rows are keys j, a thread's columns queries i.
template <typename T, int Chunks>
CABERT_TILE_KERNEL void key_grad_kernel(int64_t items, Problem<T> p, GradientInputs<T> g, T* grad_k, T* grad_v,
                                        T* key_band_grad) {
  // keys and values hold K and V chunks for the scores, then the score gradients and the dropped probabilities.
  __shared__ T keys[kRows * kStride], values[kRows * kStride], queries[kCols * kStride], grads[kCols * kStride];
  __shared__ T row_lse[kCols], row_delta[kCols];
  T* const score_grads = keys;
  T* const dropped = values;
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t tiles = (p.length + kRows - 1) / kRows;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t bh = item / tiles, b = bh / p.heads, h = bh % p.heads, j0 = item % tiles * kRows, j = j0 + r;
    T key_sums[Chunks * kChunkPerLane], value_sums[Chunks * kChunkPerLane];
    for (T& a : key_sums) a = T(0);
    for (T& a : value_sums) a = T(0);
    for (int64_t i0 = 0; i0 < p.length; i0 += kCols) {
      if (threadIdx.x < kCols) {  // the previous tile read them before its last barrier
        const int64_t query = i0 + threadIdx.x;
        row_lse[threadIdx.x] = query < p.length ? g.logsumexp[bh * p.length + query] : T(0);
        row_delta[threadIdx.x] = query < p.length ? g.delta[bh * p.length + query] : T(0);
      }
      T products[kPerLane] = {}, grad_products[kPerLane] = {};
      backward_products(products, grad_products, p, g, b, h, i0, j0, false, queries, keys, grads, values);
      T ds[kPerLane], pz[kPerLane];
      for (int m = 0; m < kPerLane; ++m) {
        const int column = lane * kPerLane + m;
        const int64_t i = i0 + column;
        ds[m] = T(0);
        pz[m] = T(0);
        if (takes_part(p, b, i, j)) {
          const T probability = exp(score(p, bh, i, j, products[m]) - row_lse[column]);
          const T z = dropout_factor(p, bh, i, j);
          ds[m] = probability * (grad_products[m] * z - row_delta[column]);
          pz[m] = probability * z;
        }
      }
      __syncthreads();  // every thread's products read K and V before they are overwritten
      for (int m = 0; m < kPerLane; ++m) {
        score_grads[r * kStride + lane * kPerLane + m] = ds[m];
        dropped[r * kStride + lane * kPerLane + m] = pz[m];
      }
      CABERT_UNROLL for (int chunk = 0; chunk < Chunks; ++chunk) {
        if (int64_t(chunk) * kChunk >= p.dim) break;
        __syncthreads();  // the tiles written, the previous chunks of Q and dO read
        load_chunk(queries, p.q, b, h, i0, p.length, int64_t(chunk) * kChunk, p.dim);
        load_chunk(grads, g.grad_out, b, h, i0, p.length, int64_t(chunk) * kChunk, p.dim);
        __syncthreads();
        add_weighted_rows(key_sums + chunk * kChunkPerLane, score_grads, queries, p.scale);
        add_weighted_rows(value_sums + chunk * kChunkPerLane, dropped, grads, T(1));
      }
      add_band_grads(key_band_grad, score_grads, p, bh, j0, i0);
    }
    if (j < p.length) {
      const int64_t offset = ((b * p.length + j) * p.heads + h) * p.dim;
      store_row<T, Chunks>(grad_k + offset, key_sums, T(1), p.dim);
      store_row<T, Chunks>(grad_v + offset, value_sums, T(1), p.dim);
    }
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

// Inputs checked and banded (kernels/attention_kernels.cc), taken (takes_tiles).
template <typename Launcher>
AttentionOutputs forward(const AttentionInputs& inputs) {
  const AttentionInputs in = with_contiguous_bands(inputs);
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2);
  AttentionOutputs result;
  result.out = heads_last_empty(in.q);
  result.logsumexp = at::empty({B, N, T}, in.q.options());
  result.tiled = true;
  const int64_t items = B * N * ((T + kRows - 1) / kRows);
  if (items == 0) return result;
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "tiled_attention_forward", [&] {
    auto run = [&](auto kernel) {
      Launcher::run(grid_of<Launcher>(items), kThreads, kernel, items, problem_of<scalar_t>(in),
                    result.out.data_ptr<scalar_t>(), result.logsumexp.data_ptr<scalar_t>());
    };
    if (in.q.size(3) <= kNarrowChunks * kChunk) {
      run(forward_kernel<scalar_t, kNarrowChunks>);
    } else {
      run(forward_kernel<scalar_t, kMaxChunks>);
    }
  });
  return result;
}

// grad_out with a contiguous last dimension; forward: this route's outputs.
template <typename Launcher>
AttentionGrads backward(const at::Tensor& grad_out, const AttentionInputs& inputs, const AttentionOutputs& forward) {
  const AttentionInputs in = with_contiguous_bands(inputs);
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2);
  AttentionGrads grads;
  grads.q = heads_last_empty(in.q);
  grads.k = heads_last_empty(in.q);
  grads.v = heads_last_empty(in.q);
  if (in.query_band.defined()) grads.query_band = at::zeros(in.query_band.sizes(), in.q.options());
  if (in.key_band.defined()) grads.key_band = at::zeros(in.key_band.sizes(), in.q.options());
  const int64_t items = B * N * ((T + kRows - 1) / kRows);
  if (items == 0) return grads;
  const at::Tensor delta = (grad_out * forward.out).sum(-1).contiguous();  // rowsum(dO o O)
  const at::Tensor logsumexp = forward.logsumexp.contiguous();
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "tiled_attention_backward", [&] {
    const Problem<scalar_t> p = problem_of<scalar_t>(in);
    const GradientInputs<scalar_t> g{head_rows<scalar_t>(grad_out), logsumexp.const_data_ptr<scalar_t>(),
                                     delta.const_data_ptr<scalar_t>()};
    auto band = [](at::Tensor& t) { return t.defined() ? t.data_ptr<scalar_t>() : nullptr; };
    auto run = [&](auto query_kernel, auto key_kernel) {
      Launcher::run(grid_of<Launcher>(items), kThreads, query_kernel, items, p, g, grads.q.data_ptr<scalar_t>(),
                    band(grads.query_band));
      Launcher::run(grid_of<Launcher>(items), kThreads, key_kernel, items, p, g, grads.k.data_ptr<scalar_t>(),
                    grads.v.data_ptr<scalar_t>(), band(grads.key_band));
    };
    if (in.q.size(3) <= kNarrowChunks * kChunk) {
      run(query_grad_kernel<scalar_t, kNarrowChunks>, key_grad_kernel<scalar_t, kNarrowChunks>);
    } else {
      run(query_grad_kernel<scalar_t, kMaxChunks>, key_grad_kernel<scalar_t, kMaxChunks>);
    }
  });
  return grads;
}

}  // namespace cabert::kernels::cuda::impl::tiles
