// The per-row maths of the CUDA attention kernel (kernels/cuda/attention_cuda.cu), host and device, so that the
// tests run it on the CPU row by row against the fused CPU kernel (tests/kernels/attention_math_test.cc), as
// kernels/conv_math.h does for the convolutions. The formula and its conventions are kernels/attention_kernels.h's:
//
//   s_ij = scale q_i.k_j + query_band[i, r(i, j)] + key_band[j, r(j, i)],  p_ij = softmax_j(s_ij) over the real
//   keys, out_i = sum_j p_ij z_ij v_j (z: the Philox dropout factor), all keys alike when none is real.
//
// One thread owns one query row in the forward (the FlashAttention online softmax over the keys: linear memory,
// only the row log-sum-exp is kept) and in the query side of the backward (dq_i and row i of the query band's
// gradient), and one key row in the key side (dk_j, dv_j and row j of the key band's gradient), so nothing is
// summed across threads: no atomics, and the results do not depend on the launch.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/conv_math.h"
#include "kernels/philox.h"

namespace cabert::kernels::attention_math {

CABERT_HOST_DEVICE float exp_of(float x) { return expf(x); }
CABERT_HOST_DEVICE double exp_of(double x) { return exp(x); }
CABERT_HOST_DEVICE float log_of(float x) { return logf(x); }
CABERT_HOST_DEVICE double log_of(double x) { return log(x); }

// One (batch, head): rows contiguous ([T, d] each; bands [T, 2 radius + 1]).
template <typename T>
struct HeadView {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* query_band = nullptr;  // or null
  const T* key_band = nullptr;    // or null
  const bool* mask = nullptr;     // [T] (true = real key) or null
  bool uniform = false;           // no real key: every key takes part with score 0, no gradient through scores
  int64_t length = 0, head_size = 0, radius = 0;
  T scale = T(1);
  float dropout_p = 0;            // Philox dropout (kernels/philox.h): element (i, j) is draw first_index + i T + j
  T kept_scale = T(1);            // 1 / (1 - p), computed in T as the CPU kernel does
  uint64_t seed = 0, offset = 0, first_index = 0;
};

// All (batch, head) pairs of one call: q, k, v contiguous [B, N, T, d], bands [B, N, T, 2 radius + 1] or null.
template <typename T>
struct Heads {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *query_band = nullptr, *key_band = nullptr;
  const bool* mask = nullptr;          // [B, T] or null
  const bool* has_real_key = nullptr;  // [B] or null (no mask)
  int64_t batch = 0, heads = 0, length = 0, head_size = 0, radius = 0;
  T scale = T(1), kept_scale = T(1);
  float dropout_p = 0;
  uint64_t seed = 0, offset = 0;
};

// The view of (batch b, head h) the row functions below take.
template <typename T>
CABERT_HOST_DEVICE HeadView<T> head_view(const Heads<T>& p, int64_t b, int64_t h) {
  HeadView<T> view;
  const int64_t bh = b * p.heads + h, rows = bh * p.length, width = 2 * p.radius + 1;
  view.q = p.q + rows * p.head_size;
  view.k = p.k + rows * p.head_size;
  view.v = p.v + rows * p.head_size;
  view.query_band = p.query_band != nullptr ? p.query_band + rows * width : nullptr;
  view.key_band = p.key_band != nullptr ? p.key_band + rows * width : nullptr;
  view.uniform = p.has_real_key != nullptr && !p.has_real_key[b];
  view.mask = p.mask != nullptr && !view.uniform ? p.mask + b * p.length : nullptr;
  view.length = p.length;
  view.head_size = p.head_size;
  view.radius = p.radius;
  view.scale = p.scale;
  view.dropout_p = p.dropout_p;
  view.kept_scale = p.kept_scale;
  view.seed = p.seed;
  view.offset = p.offset;
  view.first_index = static_cast<uint64_t>(bh) * p.length * p.length;
  return view;
}

template <typename T>
CABERT_HOST_DEVICE bool takes_part(const HeadView<T>& h, int64_t j) {
  return h.uniform || h.mask == nullptr || h.mask[j];
}

template <typename T>
CABERT_HOST_DEVICE T dot(const T* a, const T* b, int64_t n) {
  T sum = T(0);
  for (int64_t e = 0; e < n; ++e) sum += a[e] * b[e];
  return sum;
}

template <typename T>
CABERT_HOST_DEVICE T score(const HeadView<T>& h, int64_t i, int64_t j) {
  if (h.uniform) return T(0);
  const int64_t d = h.head_size, width = 2 * h.radius + 1;
  T s = h.scale * dot(h.q + i * d, h.k + j * d, d);
  if (h.query_band != nullptr) s += h.query_band[i * width + math::relative_index(i, j, h.radius)];
  if (h.key_band != nullptr) s += h.key_band[j * width + math::relative_index(j, i, h.radius)];
  return s;
}

// z_ij / (1 - p): 0 for a dropped probability, 1 without dropout.
template <typename T>
CABERT_HOST_DEVICE T dropout_factor(const HeadView<T>& h, int64_t i, int64_t j) {
  if (h.dropout_p <= 0) return T(1);
  const uint64_t index = h.first_index + static_cast<uint64_t>(i) * h.length + j;
  return philox::keep(h.seed, h.offset, index, h.dropout_p) ? h.kept_scale : T(0);
}

// A gradient of band row `row` at offset r: the single inner offsets are stored, the two clipped edges (every j
// beyond the radius on one side) summed in `low` / `high` and stored by finish_band_row.
template <typename T>
CABERT_HOST_DEVICE void add_band_grad(T* row, int64_t r, int64_t radius, T value, T& low, T& high) {
  if (r == 0) {
    low += value;
  } else if (r == 2 * radius) {
    high += value;
  } else {
    row[r] = value;
  }
}
template <typename T>
CABERT_HOST_DEVICE void finish_band_row(T* row, int64_t radius, T low, T high) {
  row[0] = low;
  if (radius > 0) row[2 * radius] = high;
}

// Forward of query row i: out_row[d] (scratch of the caller, overwritten) and the returned log-sum-exp.
template <typename T>
CABERT_HOST_DEVICE T forward_row(const HeadView<T>& h, int64_t i, T* out_row) {
  const int64_t d = h.head_size;
  for (int64_t e = 0; e < d; ++e) out_row[e] = T(0);
  T row_max = T(0), row_sum = T(0);
  bool started = false;
  for (int64_t j = 0; j < h.length; ++j) {
    if (!takes_part(h, j)) continue;
    const T s = score(h, i, j);
    if (!started || s > row_max) {  // a new maximum: rescale what is summed so far
      const T rescale = started ? exp_of(row_max - s) : T(0);
      row_sum *= rescale;
      for (int64_t e = 0; e < d; ++e) out_row[e] *= rescale;
      row_max = s;
      started = true;
    }
    const T p = exp_of(s - row_max);
    row_sum += p;
    const T weight = p * dropout_factor(h, i, j);
    if (weight != T(0)) {
      const T* v = h.v + j * d;
      for (int64_t e = 0; e < d; ++e) out_row[e] += weight * v[e];
    }
  }
  for (int64_t e = 0; e < d; ++e) out_row[e] /= row_sum;
  return row_max + log_of(row_sum);
}

// Query side of the backward for row i: dq_row[d] (overwritten) and, when query_band_grad_row is not null,
// row i of the query band's gradient (its inner entries of absent keys must be zero already). dout_row is
// d loss / d out_i, delta = dout_i . out_i, lse the row's log-sum-exp from the forward.
template <typename T>
CABERT_HOST_DEVICE void backward_query_row(const HeadView<T>& h, int64_t i, const T* dout_row, T lse, T delta,
                                           T* dq_row, T* query_band_grad_row) {
  const int64_t d = h.head_size;
  for (int64_t e = 0; e < d; ++e) dq_row[e] = T(0);
  if (h.uniform) {
    if (query_band_grad_row != nullptr) finish_band_row(query_band_grad_row, h.radius, T(0), T(0));
    return;
  }
  T low = T(0), high = T(0);
  for (int64_t j = 0; j < h.length; ++j) {
    if (!takes_part(h, j)) continue;
    const T p = exp_of(score(h, i, j) - lse);
    const T ds = p * (dot(dout_row, h.v + j * d, d) * dropout_factor(h, i, j) - delta);
    const T* k = h.k + j * d;
    for (int64_t e = 0; e < d; ++e) dq_row[e] += h.scale * ds * k[e];
    if (query_band_grad_row != nullptr) {
      add_band_grad(query_band_grad_row, math::relative_index(i, j, h.radius), h.radius, ds, low, high);
    }
  }
  if (query_band_grad_row != nullptr) finish_band_row(query_band_grad_row, h.radius, low, high);
}

// Key side of the backward for key row j: dk_row[d], dv_row[d] (overwritten) and, when key_band_grad_row is not
// null, row j of the key band's gradient. dout [T, d], lse [T] and delta [T] of the (batch, head).
template <typename T>
CABERT_HOST_DEVICE void backward_key_row(const HeadView<T>& h, int64_t j, const T* dout, const T* lse,
                                         const T* delta, T* dk_row, T* dv_row, T* key_band_grad_row) {
  const int64_t d = h.head_size;
  for (int64_t e = 0; e < d; ++e) dk_row[e] = dv_row[e] = T(0);
  T low = T(0), high = T(0);
  if (takes_part(h, j)) {
    const T* v = h.v + j * d;
    for (int64_t i = 0; i < h.length; ++i) {
      const T p = exp_of(score(h, i, j) - lse[i]);
      const T z = dropout_factor(h, i, j);
      const T* dout_row = dout + i * d;
      const T weight = p * z;
      for (int64_t e = 0; e < d; ++e) dv_row[e] += weight * dout_row[e];
      if (h.uniform) continue;
      const T ds = p * (dot(dout_row, v, d) * z - delta[i]);
      const T* q = h.q + i * d;
      for (int64_t e = 0; e < d; ++e) dk_row[e] += h.scale * ds * q[e];
      if (key_band_grad_row != nullptr) {
        add_band_grad(key_band_grad_row, math::relative_index(j, i, h.radius), h.radius, ds, low, high);
      }
    }
  }
  if (key_band_grad_row != nullptr) finish_band_row(key_band_grad_row, h.radius, low, high);
}

}  // namespace cabert::kernels::attention_math
