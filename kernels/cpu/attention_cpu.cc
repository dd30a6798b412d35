// Tile by tile: scores of a query tile against a key tile come from one BLAS product (kernels/cpu/blas.h),
// the band terms and the key mask are added in place, and the FlashAttention recurrence folds the tile into
// running row maxima, sums and output accumulators. The backward recomputes each tile's probabilities from
// the saved row log-sum-exp.
#include "kernels/cpu/attention_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/philox_lanes.h"
#include "kernels/philox.h"

namespace cabert::kernels::cpu {
namespace {

// PyTorch's CPU flash attention's blocks. Profiled at B=8 N=4 T=1024 d=64, fwd+bwd (perf samples in MKL's sgemm
// kernel): backward 128 x 256 tiles, key tiles outer 16,770; 256 x 512 key tiles outer 15,175; 256 x 512 query
// tiles outer (below) 13,664; SDPA 13,251.
constexpr int64_t kForwardQueryTile = 256;
constexpr int64_t kQueryTile = 256;  // backward
constexpr int64_t kKeyTile = 512;

// e^x for x <= 0 (every argument here is a score minus its row maximum or log-sum-exp), vectorisable: 2^n times
// the degree-5 Taylor polynomial of the remainder r = x - n ln2, |r| <= ln2 / 2 (relative error below 2.5e-6,
// about 20 ulp, the accuracy class of the exp_u20 PyTorch's own CPU flash attention uses; the double kernel
// calls std::exp). n = round(x log2 e) by the 1.5 * 2^23 trick (floorf would not vectorise without
// -fno-trapping-math), 2^n built in the exponent bits. x is clamped to [-88, 0]: from about -87.7 down (and for
// -inf, the masked keys) n = -127, whose 2^n bit pattern is +0, so the result is exactly 0 without a select
// (the true value there is below 2^-126). Both clamps compile to one min and one max.
inline float exp_nonpositive(float x) {
  const float kLog2e = 1.44269504f, kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-6f, kRound = 12582912.0f;
  const float below = x < 0.0f ? x : 0.0f;
  const float clamped = below > -88.0f ? below : -88.0f;
  const float n = (clamped * kLog2e + kRound) - kRound;
  const float r = clamped - n * kLn2Hi - n * kLn2Lo;
  float p = 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_n = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
  return p * two_n;
}
inline double exp_nonpositive(double x) { return std::exp(x); }

template <typename T>
constexpr T kMinusInfinity = -std::numeric_limits<T>::infinity();

// Row loops in fixed chunks of four 512-bit vectors with one accumulator per lane (the pattern of
// kernels/cpu/vector_loops.h): GCC vectorises these reliably, where a plain `omp simd` reduction over the
// row was left to a scalar fallback at run time (measured: the softmax loops ran scalar).
template <typename T>
constexpr int64_t kRowLanes = 256 / sizeof(T);

// lanes[0] op lanes[1] op ... op lanes[L-1] by halving, each level one vector operation: a plain loop over the
// lanes was a chain of L dependent scalar operations per row, measured at most of a row pass's time.
template <int64_t L, typename T, typename Op>
T fold_lanes(T* lanes, Op op) {
  for (int64_t half = L / 2; half >= 1; half /= 2) {
#pragma omp simd
    for (int64_t v = 0; v < half; ++v) lanes[v] = op(lanes[v], lanes[v + half]);
  }
  return lanes[0];
}
template <typename T>
T larger(T a, T b) {
  return a > b ? a : b;
}

// x[c] = x[c] scale + (edge + bias[c]) in place (the q.k product scaled, plus the terms a key outside the band
// adds); returns the largest result (-inf when n = 0). With kProbabilities, x[c] = e^(min(that - shift, 0))
// instead (the backward's probabilities from the row's log-sum-exp, in the same pass), and the return is
// meaningless.
template <bool kProbabilities = false, typename T>
T scale_add_max(T* __restrict x, int64_t n, T scale, T edge, const T* __restrict bias, T shift = T(0)) {
  constexpr int64_t L = kRowLanes<T>;
  T lanes[L];
  for (int64_t v = 0; v < L; ++v) lanes[v] = kMinusInfinity<T>;
  auto one = [&](int64_t c) {
    const T y = x[c] * scale + (edge + bias[c]);
    x[c] = kProbabilities ? exp_nonpositive(y - shift) : y;
    return y;
  };
  int64_t c = 0;
  for (; c + L <= n; c += L) {
#pragma omp simd
    for (int64_t v = 0; v < L; ++v) {
      const T y = one(c + v);
      if (!kProbabilities) lanes[v] = y > lanes[v] ? y : lanes[v];
    }
  }
  // The runs beside and inside the band have any length: the rest a vector at a time, the last one partial
  // (masked lanes: a scalar tail of up to 15 exponentials per run was a quarter of the backward's pass).
  constexpr int64_t V = 64 / sizeof(T);
  for (; c < n; c += V) {
    const int64_t live = n - c;
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) {
      if (v < live) {
        const T y = one(c + v);
        if (!kProbabilities) lanes[v] = y > lanes[v] ? y : lanes[v];
      }
    }
  }
  return kProbabilities ? T(0) : fold_lanes<L>(lanes, larger<T>);
}

// x[c] = e^(min(x[c] - shift, 0)) in place; returns the sum.
template <typename T>
T exp_in_place(T* x, int64_t n, T shift) {
  constexpr int64_t L = kRowLanes<T>;
  T lanes[L];
  for (int64_t v = 0; v < L; ++v) lanes[v] = T(0);
  int64_t c = 0;
  for (; c + L <= n; c += L) {
#pragma omp simd
    for (int64_t v = 0; v < L; ++v) {
      const T p = exp_nonpositive(x[c + v] - shift);
      x[c + v] = p;
      lanes[v] += p;
    }
  }
  constexpr int64_t V = 64 / sizeof(T);
  for (; c < n; c += V) {  // the last vector partial, as in scale_add_max
    const int64_t live = n - c;
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) {
      if (v < live) {
        const T p = exp_nonpositive(x[c + v] - shift);
        x[c + v] = p;
        lanes[v] += p;
      }
    }
  }
  return fold_lanes<L>(lanes, [](T a, T b) { return a + b; });
}

// Strided rows of one [T, d] matrix (a (batch, head) slice of q, k, v, out or a gradient).
template <typename T>
struct Rows {
  T* data = nullptr;
  int64_t ld = 0;
  T* row(int64_t i) const { return data + i * ld; }
};

template <typename T>
Rows<T> head_rows(const at::Tensor& t, int64_t b, int64_t h) {
  return {t.data_ptr<T>() + b * t.stride(0) + h * t.stride(1), t.stride(2)};
}

// Rows [first, ...) of a [T, 2n+1] band: a whole head's (first 0), or one query tile's scratch.
template <typename T>
struct BandRows {
  T* data = nullptr;
  int64_t first = 0, width = 0;
  T* row(int64_t i) const { return data + (i - first) * width; }
};

// Everything about one (batch, head) the tiles need.
template <typename T>
struct Head {
  Rows<T> q, k, v;
  BandRows<const T> query_band;  // rows of [T, 2n+1], or null data
  const T* key_band = nullptr;   // [T, 2n+1] or null
  const bool* mask = nullptr;    // [T] or null (null too when every key is masked: see `uniform`)
  bool uniform = false;          // every key masked: all scores zero, no gradient through them
  uint64_t first_index = 0;      // Philox index of element (i, j) = first_index + i T + j
};

struct Shape {
  int64_t batch, heads, length, head_size, radius, width;
};

// Per batch element: does it have no real key, and how many real keys does each key tile hold.
struct MaskSummary {
  std::vector<char> no_real_key;      // [B]
  std::vector<int64_t> real_in_tile;  // [B, key tiles]
  int64_t tiles = 0;
};

MaskSummary summarise_mask(const at::Tensor& key_mask, const Shape& s) {
  MaskSummary summary;
  summary.tiles = (s.length + kKeyTile - 1) / kKeyTile;
  summary.no_real_key.assign(s.batch, 0);
  summary.real_in_tile.assign(s.batch * summary.tiles, 0);
  for (int64_t b = 0; b < s.batch; ++b) {
    int64_t total = 0;
    for (int64_t tile = 0; tile < summary.tiles; ++tile) {
      int64_t real = kKeyTile;
      if (key_mask.defined()) {
        const bool* m = key_mask.data_ptr<bool>() + b * s.length;
        real = 0;
        for (int64_t j = tile * kKeyTile; j < std::min(s.length, (tile + 1) * kKeyTile); ++j) real += m[j];
      }
      summary.real_in_tile[b * summary.tiles + tile] = real;
      total += real;
    }
    summary.no_real_key[b] = total == 0;
  }
  return summary;
}

template <typename T>
Head<T> head_of(const AttentionInputs& in, const Shape& s, const MaskSummary& summary, int64_t b, int64_t h) {
  Head<T> head;
  head.q = head_rows<T>(in.q, b, h);
  head.k = head_rows<T>(in.k, b, h);
  head.v = head_rows<T>(in.v, b, h);
  const int64_t band_offset = (b * s.heads + h) * s.length * s.width;
  if (in.query_band.defined()) head.query_band = {in.query_band.data_ptr<T>() + band_offset, 0, s.width};
  if (in.key_band.defined()) head.key_band = in.key_band.data_ptr<T>() + band_offset;
  head.uniform = summary.no_real_key[b];
  if (in.key_mask.defined() && !head.uniform) head.mask = in.key_mask.data_ptr<bool>() + b * s.length;
  head.first_index = static_cast<uint64_t>(b * s.heads + h) * s.length * s.length;
  return head;
}

// Columns [0, left) of query row i lie left of the band (r = 0), [left, right) inside it, [right, cols)
// right of it (r = 2n); j0 is the tile's first key.
struct BandSplit {
  int64_t left, right;
};
inline BandSplit band_split(int64_t i, int64_t j0, int64_t cols, int64_t radius) {
  return {std::clamp<int64_t>(i - radius - j0, 0, cols), std::clamp<int64_t>(i + radius + 1 - j0, 0, cols)};
}

// What a key outside the band adds to its column, for queries left of it (r(j, i) = 0: the key band's first
// entry) and right of it (r(j, i) = 2n: its last), with -inf for masked keys; zeros without either.
template <typename T>
void column_terms(const Head<T>& head, const Shape& shape, int64_t j0, int64_t cols, T* key_first, T* key_last) {
  const int64_t w = shape.width, last = 2 * shape.radius;
  for (int64_t c = 0; c < cols; ++c) {
    const bool real = head.mask == nullptr || head.mask[j0 + c];
    const T* band = head.key_band != nullptr ? head.key_band + (j0 + c) * w : nullptr;
    key_first[c] = !real ? kMinusInfinity<T> : band != nullptr ? band[0] : T(0);
    key_last[c] = !real ? kMinusInfinity<T> : band != nullptr ? band[last] : T(0);
  }
}

// The scores of queries i0 .. i0+rows against keys j0 .. j0+cols into s [rows, cols] (scale q.k, the bands,
// -inf for masked keys; zeros when the head has no real key), and each row's maximum into row_max (if not
// null). One product for the tile, then one pass over each row: the runs left and right of the band add an
// edge value of the query band plus the column terms, the 2n+1 keys inside it their gathered band terms.
// With kProbabilities (the backward), each score s becomes its probability e^(s - lse[row]) in the same pass.
// key_first / key_last: scratch of cols values; band_bias: of 2n+1.
template <bool kProbabilities = false, typename T>
void tile_scores(const Head<T>& head, const Shape& shape, T scale, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                 T* s, T* row_max, T* key_first, T* key_last, T* band_bias, const T* lse = nullptr) {
  if (head.uniform) {
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(s + r * cols, s + (r + 1) * cols, kProbabilities ? exp_nonpositive(T(0) - lse[i0 + r]) : T(0));
    }
    if (row_max != nullptr) std::fill(row_max, row_max + rows, T(0));
    return;
  }
  gemm<T>(false, true, rows, cols, shape.head_size, T(1), head.q.row(i0), head.q.ld, head.k.row(j0), head.k.ld, T(0), s,
          cols);
  column_terms(head, shape, j0, cols, key_first, key_last);
  const int64_t n = shape.radius, w = shape.width;
  const T* kb = head.key_band;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    T* row = s + r * cols;
    const BandSplit split = band_split(i, j0, cols, n);
    const T* qb = head.query_band.data != nullptr ? head.query_band.row(i) : nullptr;
    const T shift = kProbabilities ? lse[i] : T(0);
    T largest =
        std::max(scale_add_max<kProbabilities>(row, split.left, scale, qb != nullptr ? qb[0] : T(0), key_last, shift),
                 scale_add_max<kProbabilities>(row + split.right, cols - split.right, scale,
                                               qb != nullptr ? qb[2 * n] : T(0), key_first + split.right, shift));
    // Inside the band: its terms gathered (the key band's entries lie 2n apart), then the same vector pass.
    const int64_t inside = split.right - split.left;
    for (int64_t k = 0; k < inside; ++k) {
      const int64_t c = split.left + k;
      T y = T(0);
      if (qb != nullptr) y += qb[j0 + c - i + n];
      if (kb != nullptr) y += kb[(j0 + c) * w + (i - j0 - c + n)];
      band_bias[k] = head.mask != nullptr && !head.mask[j0 + c] ? kMinusInfinity<T> : y;
    }
    largest = std::max(largest, scale_add_max<kProbabilities>(row + split.left, inside, scale, T(0), band_bias, shift));
    if (row_max != nullptr) row_max[r] = largest;
  }
}

// factor[r, c] = z_ij / (1 - p) for the tile (the same draws in forward and backward): each row's Philox
// blocks many at a time (kernels/cpu/philox_lanes.h), then the comparison over the row.
template <typename T>
void dropout_factors(const Head<T>& head, const Shape& shape, const DropoutDraw& dropout, int64_t i0, int64_t rows,
                     int64_t j0, int64_t cols, T* factor) {
  const float p = static_cast<float>(dropout.p);
  const T kept = T(1) / (T(1) - static_cast<T>(dropout.p));
  // A row of cols <= kKeyTile draws, starting at any word of a block, spans at most kKeyTile / 4 + 1 blocks.
  uint32_t words[4 * (kKeyTile / 4 + 1)];
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t first = head.first_index + static_cast<uint64_t>(i0 + r) * shape.length + j0;
    const uint64_t first_block = first >> 2;
    const int64_t blocks = static_cast<int64_t>(((first + cols - 1) >> 2) - first_block + 1);
    philox_words(dropout.seed, dropout.offset, first_block, blocks, words);
    const uint32_t* draws = words + (first & 3);
    T* out = factor + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] = philox::uniform(draws[c]) >= p ? kept : T(0);
  }
}

template <typename T>
bool skip_key_tile(const Head<T>& head, const MaskSummary& summary, int64_t b, int64_t tile) {
  return head.mask != nullptr && summary.real_in_tile[b * summary.tiles + tile] == 0;
}

// The relative weights (contiguous) when the terms came as weights; null each otherwise.
template <typename T>
struct Weights {
  const T* query = nullptr;  // W^C [2n+1, d]
  const T* beta = nullptr;   // [N, 2n+1]
  const T* key = nullptr;    // W^K' [2n+1, d]
  bool query_terms() const { return query != nullptr || beta != nullptr; }
};

template <typename T>
Weights<T> weights_of(const AttentionInputs& in) {
  const auto pointer = [](const at::Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
  return {pointer(in.weights.query), pointer(in.weights.beta), pointer(in.weights.key)};
}

// band[r] = scale x_(first + r).W^T (+ beta) for `rows` rows of one head: one product while the rows are in
// cache, [rows, 2n+1]. Either weight may be null (zeros, or no beta).
template <typename T>
void band_of_rows(const Rows<T>& x, int64_t first, int64_t rows, const T* weight, const T* beta, const Shape& shape,
                  T scale, T* band) {
  const int64_t w = shape.width;
  if (weight != nullptr) {
    gemm<T>(false, true, rows, w, shape.head_size, scale, x.row(first), x.ld, weight, shape.head_size, T(0), band, w);
  } else {
    std::fill(band, band + rows * w, T(0));
  }
  if (beta == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) band[r * w + c] += beta[c];
  }
}

// From weights, the key band of every head, [B, N, T, 2n+1] (the forward's query tiles all read their head's):
// one product per head over k's rows in place (no copy of heads-last k). Undefined without W^K'.
template <typename T>
at::Tensor key_bands(const AttentionInputs& in, const Shape& shape, const Weights<T>& weights) {
  if (weights.key == nullptr) return at::Tensor();
  at::Tensor bands = at::empty({shape.batch, shape.heads, shape.length, shape.width}, in.q.options());
  T* out = bands.data_ptr<T>();
  const T scale = static_cast<T>(in.scale);
  at::parallel_for(0, shape.batch * shape.heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      band_of_rows(head_rows<T>(in.k, bh / shape.heads, bh % shape.heads), 0, shape.length, weights.key,
                   static_cast<const T*>(nullptr), shape, scale, out + bh * shape.length * shape.width);
    }
  });
  return bands;
}

template <typename T>
void forward_typed(const AttentionInputs& inputs, const Shape& shape, const MaskSummary& summary,
                   AttentionOutputs& result) {
  const int64_t T_ = shape.length, d = shape.head_size, query_tiles = (T_ + kForwardQueryTile - 1) / kForwardQueryTile;
  const T scale = static_cast<T>(inputs.scale);
  const bool dropout = inputs.dropout.p > 0;
  // From weights: the key bands first (every query tile reads its head's whole), each query tile's band in its
  // task.
  const Weights<T> weights = weights_of<T>(inputs);
  AttentionInputs in = inputs;
  if (weights.key != nullptr) in.key_band = key_bands(inputs, shape, weights);
  T* out = result.out.data_ptr<T>();        // [B, T, N, d] storage
  T* lse = result.logsumexp.data_ptr<T>();  // [B, N, T]
  // Scratch for the largest tile this length has (short sequences: much less than a full tile's 512 KiB).
  const int64_t tile_rows = std::min(kForwardQueryTile, T_), tile_cols = std::min(kKeyTile, T_);
  at::parallel_for(0, shape.batch * shape.heads * query_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(tile_rows * tile_cols), factor(dropout ? tile_rows * tile_cols : 0), acc(tile_rows * d);
    std::vector<T> row_max(tile_rows), row_sum(tile_rows), tile_max(tile_rows), key_first(tile_cols),
        key_last(tile_cols), band_bias(shape.width), query_band(weights.query_terms() ? tile_rows * shape.width : 0);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / query_tiles, b = bh / shape.heads, h = bh % shape.heads;
      const int64_t i0 = (task % query_tiles) * kForwardQueryTile, rows = std::min(kForwardQueryTile, T_ - i0);
      Head<T> head = head_of<T>(in, shape, summary, b, h);
      if (weights.query_terms()) {
        band_of_rows(head.q, i0, rows, weights.query, weights.beta ? weights.beta + h * shape.width : nullptr, shape,
                     scale, query_band.data());
        head.query_band = {query_band.data(), i0, shape.width};
      }
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(row_max.begin(), row_max.end(), kMinusInfinity<T>);
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      for (int64_t tile = 0; tile < summary.tiles; ++tile) {
        if (skip_key_tile(head, summary, b, tile)) continue;
        const int64_t j0 = tile * kKeyTile, cols = std::min(kKeyTile, T_ - j0);
        tile_scores(head, shape, scale, i0, rows, j0, cols, s.data(), tile_max.data(), key_first.data(),
                    key_last.data(), band_bias.data());
        if (dropout) dropout_factors(head, shape, in.dropout, i0, rows, j0, cols, factor.data());
        for (int64_t r = 0; r < rows; ++r) {
          T* row = s.data() + r * cols;
          const T new_max = std::max(row_max[r], tile_max[r]);
          if (new_max == kMinusInfinity<T>) {  // no real key so far: nothing to add
            std::fill(row, row + cols, T(0));
            continue;
          }
          const T rescale = row_max[r] == kMinusInfinity<T> ? T(0) : exp_nonpositive(row_max[r] - new_max);
          const T sum = exp_in_place(row, cols, new_max);
          row_sum[r] = row_sum[r] * rescale + sum;
          row_max[r] = new_max;
          T* a = acc.data() + r * d;
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) a[e] *= rescale;
          if (dropout) {
            const T* f = factor.data() + r * cols;
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) row[c] *= f[c];
          }
        }
        gemm<T>(false, false, rows, d, cols, T(1), s.data(), cols, head.v.row(j0), head.v.ld, T(1), acc.data(), d);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        T* o = out + ((b * T_ + i) * shape.heads + h) * d;
        const T inverse = row_sum[r] > 0 ? T(1) / row_sum[r] : T(0);
        const T* a = acc.data() + r * d;
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) o[e] = a[e] * inverse;
        lse[bh * T_ + i] = row_sum[r] > 0 ? row_max[r] + std::log(row_sum[r]) : kMinusInfinity<T>;
      }
    }
  });
}

// One score gradient: p (dP z / (1 - p) - delta), with dP in g and (kDropout) z / (1 - p) in f.
template <bool kDropout, typename T>
inline T score_grad(T g, T p, T f, T delta) {
  return p * ((kDropout ? g * f : g) - delta);
}

// Over a run of n columns beside the band: the score gradients in place over dP (score_grad; f is read only
// with kDropout), each added to its key's edge gradient key_grad[c] (the key band's entry that every query on
// this side of the key shares); returns their sum (the query band's edge entry). One pass instead of three:
// the gradients, then the two bands' reductions over the tile.
template <bool kDropout, typename T>
T run_score_grads(T* __restrict g, const T* __restrict p, const T* __restrict f, T delta, T* __restrict key_grad,
                  int64_t n) {
  constexpr int64_t L = kRowLanes<T>, V = 64 / sizeof(T);
  T lanes[L];
  for (int64_t v = 0; v < L; ++v) lanes[v] = T(0);
  auto one = [&](int64_t c) {
    const T y = score_grad<kDropout>(g[c], p[c], kDropout ? f[c] : T(0), delta);
    g[c] = y;
    key_grad[c] += y;
    return y;
  };
  int64_t c = 0;
  for (; c + L <= n; c += L) {
#pragma omp simd
    for (int64_t v = 0; v < L; ++v) lanes[v] += one(c + v);
  }
  for (; c < n; c += V) {  // the last vector partial, as in scale_add_max
    const int64_t live = n - c;
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) {
      if (v < live) lanes[v] += one(c + v);
    }
  }
  return fold_lanes<L>(lanes, [](T x, T y) { return x + y; });
}

// The score gradients of the tile's rows [rows, cols] in place over dP (ds = p (dP z / (1 - p) - delta)) and
// their sums into the band gradients: the query band's row i, and the key band's entries (the runs outside
// the band through key_first_grad / key_last_grad, indexed by key from the tile's first).
template <bool kDropout, typename T>
void score_grads(const Shape& shape, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const T* probabilities,
                 const T* factor, const T* delta, T* ds, const BandRows<T>& query_band_grad, T* key_band_grad,
                 T* key_first_grad, T* key_last_grad) {
  const int64_t n = shape.radius, w = shape.width;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    const BandSplit split = band_split(i, j0, cols, n);
    T* g = ds + r * cols;
    const T* p = probabilities + r * cols;
    const T* f = kDropout ? factor + r * cols : nullptr;
    const T delta_i = delta[i];
    const T left = run_score_grads<kDropout>(g, p, f, delta_i, key_last_grad, split.left);
    const T right = run_score_grads<kDropout>(g + split.right, p + split.right, kDropout ? f + split.right : nullptr,
                                              delta_i, key_first_grad + split.right, cols - split.right);
    T* qg = query_band_grad.data != nullptr ? query_band_grad.row(i) : nullptr;
#pragma omp simd
    for (int64_t c = split.left; c < split.right; ++c)
      g[c] = score_grad<kDropout>(g[c], p[c], kDropout ? f[c] : T(0), delta_i);
    if (qg != nullptr) {
#pragma omp simd
      for (int64_t c = split.left; c < split.right; ++c) qg[j0 + c - i + n] += g[c];
    }
    if (key_band_grad != nullptr) {
      for (int64_t c = split.left; c < split.right; ++c) key_band_grad[(j0 + c) * w + (i - j0 - c + n)] += g[c];
    }
    if (qg != nullptr) {
      qg[0] += left;
      qg[2 * n] += right;
    }
  }
}

// The weights' gradients, one slot per (batch, head) so that no sum depends on how the heads fall to threads:
// scale g^T q and scale g^T k for W^C and W^K' [2n+1, d], the query band gradient's column sums for beta.
template <typename T>
struct WeightGradSlots {
  std::vector<T> query, beta, key;  // [B N, 2n+1, d], [B N, 2n+1], [B N, 2n+1, d] where the weight is given
};

// The slots summed over (batch, head) in a fixed order (beta's per head) into the weights' gradients.
template <typename T>
void sum_weight_grads(const WeightGradSlots<T>& slots, const AttentionInputs& in, const Shape& shape,
                      AttentionGrads& grads) {
  const int64_t heads = shape.batch * shape.heads, w = shape.width, d = shape.head_size;
  const auto sum_into = [&](const std::vector<T>& slot, int64_t size, int64_t groups, at::Tensor& grad) {
    T* out = grad.data_ptr<T>();  // zeroed
    for (int64_t bh = 0; bh < heads; ++bh) {
      const T* part = slot.data() + bh * size;
      T* g = out + (bh % groups) * size;
#pragma omp simd
      for (int64_t e = 0; e < size; ++e) g[e] += part[e];
    }
  };
  if (!slots.query.empty()) sum_into(slots.query, w * d, 1, grads.query_weight = at::zeros_like(in.weights.query));
  if (!slots.beta.empty()) sum_into(slots.beta, w, shape.heads, grads.beta = at::zeros_like(in.weights.beta));
  if (!slots.key.empty()) sum_into(slots.key, w * d, 1, grads.key_weight = at::zeros_like(in.weights.key));
}

template <typename T>
void backward_typed(const at::Tensor& grad_out, const AttentionInputs& in, const AttentionOutputs& forward,
                    const Shape& shape, const MaskSummary& summary, AttentionGrads& grads) {
  const int64_t T_ = shape.length, d = shape.head_size, n = shape.radius, w = shape.width;
  const T scale = static_cast<T>(in.scale);
  const bool dropout = in.dropout.p > 0;
  const T* lse_all = forward.logsumexp.data_ptr<T>();
  auto* const score_grads_of = dropout ? &score_grads<true, T> : &score_grads<false, T>;
  const int64_t tile_rows = std::min(kQueryTile, T_), tile_size = tile_rows * std::min(kKeyTile, T_),
                tile_cols = std::min(kKeyTile, T_);
  // From weights, each head's key band and its gradient, and each query tile's band and its gradient, live in
  // scratch; the bands' gradients reach q, k and the weights at the end of their tile (query) or head (key).
  const Weights<T> weights = weights_of<T>(in);
  const int64_t heads = shape.batch * shape.heads;
  WeightGradSlots<T> slots;
  if (weights.query != nullptr) slots.query.assign(heads * w * d, T(0));
  if (weights.beta != nullptr) slots.beta.assign(heads * w, T(0));
  if (weights.key != nullptr) slots.key.assign(heads * w * d, T(0));
  at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(tile_size), ds(tile_size), factor(dropout ? tile_size : 0), dropped(dropout ? tile_size : 0);
    std::vector<T> key_first(tile_cols), key_last(tile_cols), key_first_grad(T_), key_last_grad(T_), delta(T_),
        band_bias(w);
    const int64_t query_scratch = weights.query_terms() ? tile_rows * w : 0, key_scratch = weights.key ? T_ * w : 0;
    std::vector<T> query_band(query_scratch), query_band_grad(query_scratch), key_band(key_scratch),
        key_band_grad_scratch(key_scratch);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / shape.heads, h = bh % shape.heads;
      Head<T> head = head_of<T>(in, shape, summary, b, h);
      const Rows<T> dout = head_rows<T>(grad_out, b, h), out = head_rows<T>(forward.out, b, h);
      const Rows<T> dq = head_rows<T>(grads.q, b, h), dk_rows = head_rows<T>(grads.k, b, h),
                    dv_rows = head_rows<T>(grads.v, b, h);
      const T* lse = lse_all + bh * T_;
      BandRows<T> query_grad;
      if (grads.query_band.defined()) query_grad = {grads.query_band.data_ptr<T>() + bh * T_ * w, 0, w};
      T* key_band_grad = grads.key_band.defined() ? grads.key_band.data_ptr<T>() + bh * T_ * w : nullptr;
      const T* beta = weights.beta != nullptr ? weights.beta + h * w : nullptr;
      if (weights.key != nullptr) {
        band_of_rows(head.k, 0, T_, weights.key, static_cast<const T*>(nullptr), shape, scale, key_band.data());
        head.key_band = key_band.data();
        std::fill(key_band_grad_scratch.begin(), key_band_grad_scratch.end(), T(0));
        key_band_grad = key_band_grad_scratch.data();
      }
      for (int64_t i = 0; i < T_; ++i) {  // delta_i = dO_i . O_i = sum_j p_ij z_ij dP_ij
        const T* a = dout.row(i);
        const T* o = out.row(i);
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t e = 0; e < d; ++e) sum += a[e] * o[e];
        delta[i] = sum;
      }
      // Query tiles outer, key tiles inner (PyTorch's CPU flash backward's order): dK and dV accumulate in the
      // zeroed gradients directly, the key band's edge terms in per-key sums added once at the end.
      std::fill(key_first_grad.begin(), key_first_grad.end(), T(0));
      std::fill(key_last_grad.begin(), key_last_grad.end(), T(0));
      for (int64_t i0 = 0; i0 < T_; i0 += kQueryTile) {
        const int64_t rows = std::min(kQueryTile, T_ - i0);
        if (weights.query_terms()) {
          band_of_rows(head.q, i0, rows, weights.query, beta, shape, scale, query_band.data());
          head.query_band = {query_band.data(), i0, w};
          std::fill(query_band_grad.begin(), query_band_grad.end(), T(0));
          query_grad = {query_band_grad.data(), i0, w};
        }
        for (int64_t tile = 0; tile < summary.tiles; ++tile) {
          if (skip_key_tile(head, summary, b, tile)) continue;  // their dK and dV stay zero
          const int64_t j0 = tile * kKeyTile, cols = std::min(kKeyTile, T_ - j0);
          // The probabilities, from the saved log-sum-exp.
          tile_scores<true>(head, shape, scale, i0, rows, j0, cols, s.data(), static_cast<T*>(nullptr),
                            key_first.data(), key_last.data(), band_bias.data(), lse);
          const T* used = s.data();  // p z / (1 - p): what multiplied V
          if (dropout) {
            dropout_factors(head, shape, in.dropout, i0, rows, j0, cols, factor.data());
            for (int64_t e = 0; e < rows * cols; ++e) dropped[e] = s[e] * factor[e];
            used = dropped.data();
          }
          gemm<T>(true, false, cols, d, rows, T(1), used, cols, dout.row(i0), dout.ld, T(1), dv_rows.row(j0),
                  dv_rows.ld);
          if (head.uniform) continue;  // constant scores: no gradient reaches q, k or the bands
          gemm<T>(false, true, rows, cols, d, T(1), dout.row(i0), dout.ld, head.v.row(j0), head.v.ld, T(0), ds.data(),
                  cols);
          score_grads_of(shape, i0, rows, j0, cols, s.data(), factor.data(), delta.data(), ds.data(), query_grad,
                         key_band_grad, key_first_grad.data() + j0, key_last_grad.data() + j0);
          gemm<T>(false, false, rows, d, cols, scale, ds.data(), cols, head.k.row(j0), head.k.ld, T(1), dq.row(i0),
                  dq.ld);
          gemm<T>(true, false, cols, d, rows, scale, ds.data(), cols, head.q.row(i0), head.q.ld, T(1), dk_rows.row(j0),
                  dk_rows.ld);
        }
        if (weights.query != nullptr) {  // the tile's band gradient g: dq += scale g W^C, dW^C += scale g^T q
          gemm<T>(false, false, rows, d, w, scale, query_band_grad.data(), w, weights.query, d, T(1), dq.row(i0),
                  dq.ld);
          gemm<T>(true, false, w, d, rows, scale, query_band_grad.data(), w, head.q.row(i0), head.q.ld, T(1),
                  slots.query.data() + bh * w * d, d);
        }
        if (beta != nullptr) {
          T* beta_grad = slots.beta.data() + bh * w;
          for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
            for (int64_t c = 0; c < w; ++c) beta_grad[c] += query_band_grad[r * w + c];
          }
        }
      }
      if (key_band_grad != nullptr) {
        for (int64_t j = 0; j < T_; ++j) {
          key_band_grad[j * w] += key_first_grad[j];
          key_band_grad[j * w + 2 * n] += key_last_grad[j];
        }
      }
      if (weights.key != nullptr) {  // the head's key band gradient g: dk += scale g W^K', dW^K' = scale g^T k
        gemm<T>(false, false, T_, d, w, scale, key_band_grad, w, weights.key, d, T(1), dk_rows.row(0), dk_rows.ld);
        gemm<T>(true, false, w, d, T_, scale, key_band_grad, w, head.k.row(0), head.k.ld, T(0),
                slots.key.data() + bh * w * d, d);
      }
    }
  });
  sum_weight_grads(slots, in, shape, grads);
}

Shape shape_of(const AttentionInputs& in) {
  return {in.q.size(0), in.q.size(1), in.q.size(2), in.q.size(3), in.radius, 2 * in.radius + 1};
}

// [B, N, T, d] viewed on [B, T, N, d] storage, zeroed.
at::Tensor heads_last_zeros(const at::Tensor& like) {
  return at::zeros({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options()).transpose(1, 2);
}

}  // namespace

AttentionOutputs relative_attention_forward(const AttentionInputs& in) {
  const Shape shape = shape_of(in);
  const MaskSummary summary = summarise_mask(in.key_mask, shape);
  AttentionOutputs result;
  result.out = heads_last_empty(in.q);
  result.logsumexp = at::empty({shape.batch, shape.heads, shape.length}, in.q.options());
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "relative_attention_forward_cpu",
                             [&] { forward_typed<scalar_t>(in, shape, summary, result); });
  return result;
}

AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward) {
  const Shape shape = shape_of(in);
  const MaskSummary summary = summarise_mask(in.key_mask, shape);
  AttentionGrads grads;
  grads.q = heads_last_zeros(in.q);
  grads.k = heads_last_zeros(in.k);
  grads.v = heads_last_zeros(in.v);
  if (in.query_band.defined()) grads.query_band = at::zeros_like(in.query_band);
  if (in.key_band.defined()) grads.key_band = at::zeros_like(in.key_band);
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "relative_attention_backward_cpu",
                             [&] { backward_typed<scalar_t>(grad_out, in, forward, shape, summary, grads); });
  return grads;
}

}  // namespace cabert::kernels::cpu
