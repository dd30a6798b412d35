// Composite attention as two fused causal regions and a strip; kernels/regions/attention_regions.h has the
// scheme.
#include "kernels/regions/attention_regions.h"

#include <algorithm>
#include <limits>

#include "kernels/dropout_kernels.h"
#include "kernels/key_mask_facts.h"
#include "kernels/plain_aten.h"

namespace cabert::kernels::regions {
namespace {

// A masked key's augmented entry: far below any score, finite, so that a region whose keys are all masked
// for a row gives a finite output of weight exp(-huge) = 0 instead of 0 / 0.
constexpr double kMaskedKey = -1e30;

enum class Side { kLeft, kRight };

struct Problem {
  int64_t batch = 0, heads = 0, length = 0, head_size = 0, radius = 0;
  int64_t width = 0;      // 2n + 1
  int64_t augmented = 0;  // the regions' q and k width: d + 2 rounded up to 8 (the fused kernels' alignment)
  double scale = 1;
  at::Tensor q, k, v;               // [B, N, T, d]
  at::Tensor query_band, key_band;  // [B, N, T, 2n+1] or undefined
  at::Tensor real;                  // [B, T] bool or undefined
  DropoutDraw dropout;
  at::ScalarType kernel_dtype = at::kFloat;                                            // the fused kernel's operands
  int64_t region_length() const { return std::max<int64_t>(0, length - radius - 1); }  // M = T - n - 1
};

Problem problem_of(const AttentionInputs& in) {
  Problem p;
  p.batch = in.q.size(0);
  p.heads = in.q.size(1);
  p.length = in.q.size(2);
  p.head_size = in.q.size(3);
  p.radius = in.radius;
  p.width = 2 * in.radius + 1;
  p.augmented = (p.head_size + 2 + 7) / 8 * 8;
  p.scale = in.scale;
  p.q = in.q;
  p.k = in.k;
  p.v = in.v;
  p.query_band = in.query_band;
  p.key_band = in.key_band;
  p.real = in.key_mask;
  p.dropout = in.dropout;
  p.kernel_dtype = in.fused_kernel_dtype.value_or(in.q.scalar_type());
  return p;
}

// ---- the regions ----

// Where a side's region sits: queries q0 .. q0+M, keys k0 .. k0+M; the edge entries its rows and keys take.
struct Region {
  int64_t query_begin = 0, key_begin = 0, length = 0;
  int64_t query_edge = 0, key_edge = 0;  // query_band[i, query_edge], key_band[j, key_edge]
  bool reversed = false;                 // right of the band: both axes reversed to make it causal
};

Region region_of(const Problem& p, Side side) {
  Region r;
  r.length = p.region_length();
  const int64_t n = p.radius;
  if (side == Side::kLeft) {  // j <= i - n - 1: r(i, j) = 0, r(j, i) = 2n
    r.query_begin = n + 1;
    r.key_edge = 2 * n;
  } else {  // j >= i + n + 1: r(i, j) = 2n, r(j, i) = 0
    r.key_begin = n + 1;
    r.query_edge = 2 * n;
    r.reversed = true;
  }
  return r;
}

at::Tensor reversed_if(const at::Tensor& t, bool reversed) { return reversed ? at::flip(t, {2}) : t; }

struct RegionOperands {
  at::Tensor q, k, v;  // [B, N, M, e], [B, N, M, e], [B, N, M, d], in the region's (causal) order
};

// [scale q_i, 1, query_band[i, edge], 0 ...] and [k_j, key_band[j, edge] (kMaskedKey where masked), 1, 0 ...].
RegionOperands region_operands(const Problem& p, const Region& r) {
  const int64_t d = p.head_size, M = r.length;
  const auto options = p.q.options();
  RegionOperands o;
  at::Tensor q = at::zeros({p.batch, p.heads, M, p.augmented}, options);
  at::Tensor scaled_queries = q.narrow(3, 0, d);
  at::mul_out(scaled_queries, p.q.narrow(2, r.query_begin, M), p.scale);
  q.select(3, d).fill_(1);
  if (p.query_band.defined())
    q.select(3, d + 1).copy_(p.query_band.narrow(2, r.query_begin, M).select(3, r.query_edge));
  at::Tensor k = at::zeros({p.batch, p.heads, M, p.augmented}, options);
  k.narrow(3, 0, d).copy_(p.k.narrow(2, r.key_begin, M));
  at::Tensor key_column = k.select(3, d);  // [B, N, M]
  if (p.key_band.defined()) key_column.copy_(p.key_band.narrow(2, r.key_begin, M).select(3, r.key_edge));
  if (p.real.defined()) {
    key_column.masked_fill_(p.real.narrow(1, r.key_begin, M).logical_not().view({p.batch, 1, M}), kMaskedKey);
  }
  k.select(3, d + 1).fill_(1);
  o.q = reversed_if(q, r.reversed);
  o.k = reversed_if(k, r.reversed);
  o.v = r.reversed ? at::flip(p.v.narrow(2, r.key_begin, M), {2}) : p.v.narrow(2, r.key_begin, M).contiguous();
  return o;
}

// Both regions in one call of the kernel: their operands stacked along the batch, the left region's rows
// [0, B), the right one's [B, 2B) (reversed), in the kernel's dtype.
RegionOperands stacked_operands(const Problem& p) {
  const RegionOperands left = region_operands(p, region_of(p, Side::kLeft));
  const RegionOperands right = region_operands(p, region_of(p, Side::kRight));
  const auto stacked = [&](const at::Tensor& a, const at::Tensor& b) { return at::cat({a, b}).to(p.kernel_dtype); };
  return {stacked(left.q, right.q), stacked(left.k, right.k), stacked(left.v, right.v)};
}

// A [B, N, T, c] tensor's query rows of both regions, stacked as their operands (in `dtype`).
at::Tensor stacked_rows(const Problem& p, const at::Tensor& x, at::ScalarType dtype) {
  const Region left = region_of(p, Side::kLeft), right = region_of(p, Side::kRight);
  return at::cat({x.narrow(2, left.query_begin, left.length),
                  reversed_if(x.narrow(2, right.query_begin, right.length), right.reversed)})
      .to(dtype);
}

// One side's part of a stacked [2B, ...] result, in the side's own order.
at::Tensor side_part(const Problem& p, const at::Tensor& stacked, Side side) {
  return reversed_if(stacked.narrow(0, side == Side::kLeft ? 0 : p.batch, p.batch), side == Side::kRight);
}

// ---- the strip ----

// Blocks of R query rows against windows of R + 2n keys (the block's rows shifted by -n .. n): row rho of a
// block meets its 2n+1 strip keys at window columns rho .. rho + 2n. R >= 2n, so that a window's last 2n
// rows fall inside the next block's first R rows (fold_windows).
struct StripBlocks {
  int64_t rows = 0, blocks = 0, window = 0;
  int64_t padded_length() const { return rows * blocks; }      // Tp >= T
  int64_t keys_length() const { return rows * (blocks + 1); }  // the padded keys: n zeros, T keys, zeros
  at::Tensor columns;                                          // [R, 2n+1]: rho + r
};

StripBlocks strip_blocks(const Problem& p) {
  StripBlocks s;
  s.rows = strip_block_rows(p.radius);
  s.blocks = (p.length + s.rows - 1) / s.rows;
  s.window = s.rows + 2 * p.radius;
  s.columns = (at::arange(s.rows, p.q.options().dtype(at::kLong)).unsqueeze(1) +
               at::arange(p.width, p.q.options().dtype(at::kLong)).unsqueeze(0));
  return s;
}

// [B, N, T, c] -> [B, N, blocks, R, c], rows padded with zeros.
at::Tensor query_blocks(const at::Tensor& x, const StripBlocks& s) {
  const at::Tensor padded = at::constant_pad_nd(x, {0, 0, 0, s.padded_length() - x.size(2)});
  return padded.view({x.size(0), x.size(1), s.blocks, s.rows, x.size(3)});
}

// [B, N, T, c] -> the windows [B, N, blocks, R + 2n, c] of the keys padded by n zeros in front.
at::Tensor key_windows(const at::Tensor& x, const StripBlocks& s, int64_t n) {
  const at::Tensor padded = at::constant_pad_nd(x, {0, 0, n, s.keys_length() - n - x.size(2)});
  return padded.unfold(2, s.window, s.rows).narrow(2, 0, s.blocks).transpose(-1, -2);
}

// The inverse of key_windows for gradients: each window's rows added back to its keys -> [B, N, T, c].
at::Tensor fold_windows(const at::Tensor& windows, const StripBlocks& s, int64_t n, int64_t length) {
  const int64_t B = windows.size(0), N = windows.size(1), c = windows.size(4), R = s.rows;
  at::Tensor keys = at::zeros({B, N, s.keys_length(), c}, windows.options());
  keys.narrow(2, 0, s.padded_length()).view({B, N, s.blocks, R, c}).add_(windows.narrow(3, 0, R));
  if (n > 0) {  // the last 2n rows of window b are the first 2n of block b + 1
    keys.narrow(2, R, s.padded_length())
        .view({B, N, s.blocks, R, c})
        .narrow(3, 0, 2 * n)
        .add_(windows.narrow(3, R, 2 * n));
  }
  return keys.narrow(2, n, length);
}

// [B, N, blocks, R, R + 2n] block matrices <-> their [B, N, Tp, 2n+1] strips.
at::Tensor strip_of(const at::Tensor& blocks, const StripBlocks& s, int64_t width) {
  const auto sizes = blocks.sizes();
  return blocks.gather(4, s.columns.expand({sizes[0], sizes[1], sizes[2], s.rows, width}))
      .view({sizes[0], sizes[1], s.padded_length(), width});
}
at::Tensor blocks_of(const at::Tensor& strip, const StripBlocks& s) {
  const int64_t B = strip.size(0), N = strip.size(1), width = strip.size(3);
  const at::Tensor entries = strip.view({B, N, s.blocks, s.rows, width});
  return at::zeros({B, N, s.blocks, s.rows, s.window}, strip.options())
      .scatter_(4, s.columns.expand({B, N, s.blocks, s.rows, width}), entries);
}

// The key band's entries of the strip, key_band[j, 2n - r] for query i and j = i + r - n, as a view of the key
// band padded by n rows in front: entry (i, r) sits at padded row i + r, column 2n - r, that is at
// i (2n+1) + r 2n + 2n. The map is one to one, so the view also scatters the strip's gradients back.
at::Tensor key_band_strip(const at::Tensor& padded_key_band, const StripBlocks& s, int64_t n) {
  const int64_t B = padded_key_band.size(0), N = padded_key_band.size(1), rows = padded_key_band.size(2), W = 2 * n + 1;
  return padded_key_band.as_strided({B, N, s.padded_length(), W}, {N * rows * W, rows * W, W, W - 1},
                                    padded_key_band.storage_offset() + 2 * n);
}
int64_t key_band_rows(const StripBlocks& s, int64_t n) { return s.padded_length() + 2 * n; }

// The strip's scores [B, N, Tp, 2n+1]: scale q_i.k_j + query_band[i, r] + key_band[j, 2n - r] for
// j = i + r - n, -inf where j is outside 0 .. T-1 or masked.
at::Tensor strip_scores(const Problem& p, const StripBlocks& s, const at::Tensor& query_blocks_,
                        const at::Tensor& key_windows_) {
  const int64_t B = p.batch, T = p.length, n = p.radius, Tp = s.padded_length();
  at::Tensor scores = strip_of(at::matmul(query_blocks_, key_windows_.transpose(-1, -2)), s, p.width).mul_(p.scale);
  if (p.query_band.defined()) scores.add_(at::constant_pad_nd(p.query_band, {0, 0, 0, Tp - T}));
  if (p.key_band.defined()) {
    const at::Tensor padded = at::constant_pad_nd(p.key_band, {0, 0, n, key_band_rows(s, n) - n - T}).contiguous();
    scores.add_(key_band_strip(padded, s, n));
  }
  // Real keys among the padded rows i + r (j = i + r - n): a [B, 1, Tp, 2n+1] view of one row per batch.
  at::Tensor real = at::zeros({B, key_band_rows(s, n)}, p.q.options().dtype(at::kBool));
  if (p.real.defined()) {
    real.narrow(1, n, T).copy_(p.real);
  } else {
    real.narrow(1, n, T).fill_(true);
  }
  const int64_t rows = real.size(1);
  const at::Tensor real_strip = real.as_strided({B, 1, Tp, p.width}, {rows, 0, 1, 1});
  return scores.masked_fill_(real_strip.logical_not(), -std::numeric_limits<double>::infinity());
}

// The strip's probabilities exp(s - lse_i) under the whole rows' log-sum-exp (padded rows: 0).
at::Tensor strip_probabilities(at::Tensor scores, const at::Tensor& logsumexp, const StripBlocks& s) {
  const at::Tensor lse = at::constant_pad_nd(logsumexp, {0, s.padded_length() - logsumexp.size(2)},
                                             std::numeric_limits<double>::infinity());
  return scores.sub_(lse.unsqueeze(-1)).exp_();
}

at::Tensor strip_dropout(const at::Tensor& x, const DropoutDraw& strip_draw) {
  return strip_draw.p > 0 ? philox_dropout(x, strip_draw) : x;
}

}  // namespace

// The seeds of the parts' masks, apart from one another (SplitMix64's finaliser on seed and part).
DropoutDraw part_draw(const DropoutDraw& draw, int part) {
  uint64_t z = draw.seed + static_cast<uint64_t>(part) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  DropoutDraw d = draw;
  d.seed = z ^ (z >> 31);
  return d;
}

int64_t strip_block_rows(int64_t radius) { return std::max<int64_t>(32, (2 * radius + 7) / 8 * 8); }

bool takes(const AttentionInputs& in) {
  const bool dtype_ok =
      in.q.is_cuda() ? in.q.scalar_type() == at::kFloat
                     : (in.q.scalar_type() == at::kFloat || in.q.scalar_type() == at::kDouble) && in.dropout.p == 0;
  if (!dtype_ok) return false;
  return !in.key_mask.defined() || !key_mask_facts(in.key_mask).keyless_row;
}

AttentionOutputs relative_attention_forward(const AttentionInputs& in, const RegionKernel& kernel) {
  const PlainAten plain;
  const Problem p = problem_of(in);
  const int64_t T = p.length, n = p.radius, M = p.region_length();
  const StripBlocks s = strip_blocks(p);
  const at::Tensor queries = query_blocks(p.q, s), keys = key_windows(p.k, s, n), values = key_windows(p.v, s, n);
  at::Tensor scores = strip_scores(p, s, queries, keys);
  at::Tensor lse = at::logsumexp(scores, -1).narrow(2, 0, T).contiguous();  // the strip's; -inf without keys
  RegionForward regions;
  at::Tensor side_lse[2];  // each region's log-sum-exp in its own order
  at::Tensor rng = at::zeros({2}, at::kLong);
  if (M > 0) {
    const RegionOperands o = stacked_operands(p);
    regions = kernel.forward(o.q, o.k, o.v, part_draw(p.dropout, 1));
    if (regions.rng.defined()) rng.copy_(regions.rng);
    const at::Tensor region_lse = regions.logsumexp.to(p.q.scalar_type());
    for (const Side side : {Side::kLeft, Side::kRight}) {
      at::Tensor& part = side_lse[static_cast<int>(side)];
      part = side_part(p, region_lse, side);
      at::Tensor rows = lse.narrow(2, region_of(p, side).query_begin, M);
      rows.copy_(at::logaddexp(rows, part));
    }
  }
  const at::Tensor probabilities = strip_dropout(strip_probabilities(scores, lse, s), part_draw(p.dropout, 2));
  at::Tensor out = at::matmul(blocks_of(probabilities, s), values)
                       .view({p.batch, p.heads, s.padded_length(), p.head_size})
                       .narrow(2, 0, T);
  if (M > 0) {
    const at::Tensor region_out = regions.out.to(p.q.scalar_type());
    for (const Side side : {Side::kLeft, Side::kRight}) {
      const int64_t begin = region_of(p, side).query_begin;
      const at::Tensor weight = (side_lse[static_cast<int>(side)] - lse.narrow(2, begin, M)).exp_().unsqueeze(-1);
      out.narrow(2, begin, M).addcmul_(weight, side_part(p, region_out, side));
    }
  }
  AttentionOutputs result;
  result.out = heads_last(out);
  result.logsumexp = lse;
  result.rng = rng;
  return result;
}

AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward, const RegionKernel& kernel) {
  const PlainAten plain;
  const Problem p = problem_of(in);
  const int64_t B = p.batch, N = p.heads, T = p.length, d = p.head_size, n = p.radius, M = p.region_length();
  const at::Tensor& out = forward.out;
  const at::Tensor lse = forward.logsumexp.contiguous();
  const at::Tensor delta = (grad_out * out).sum(-1);  // dO_i . O_i = sum_j p_ij z_ij dP_ij
  at::Tensor dq = at::zeros({B, N, T, d}, p.q.options()), dk = at::zeros_like(dq), dv = at::zeros_like(dq);
  at::Tensor query_band_grad, key_band_grad;
  if (p.query_band.defined()) query_band_grad = at::zeros({B, N, T, p.width}, p.q.options());
  if (p.key_band.defined()) key_band_grad = at::zeros({B, N, T, p.width}, p.q.options());
  if (M > 0) {
    const RegionOperands o = stacked_operands(p);
    const RegionGrads g =
        kernel.backward(stacked_rows(p, grad_out, p.kernel_dtype), o.q, o.k, o.v, stacked_rows(p, out, p.kernel_dtype),
                        stacked_rows(p, lse, lse.scalar_type()), part_draw(p.dropout, 1), forward.rng);
    for (const Side side : {Side::kLeft, Side::kRight}) {
      const Region r = region_of(p, side);
      const at::Tensor gq = side_part(p, g.q, side), gk = side_part(p, g.k, side);
      dq.narrow(2, r.query_begin, M).add_(gq.narrow(3, 0, d), p.scale);
      dk.narrow(2, r.key_begin, M).add_(gk.narrow(3, 0, d));
      dv.narrow(2, r.key_begin, M).add_(side_part(p, g.v, side));
      if (query_band_grad.defined()) {
        query_band_grad.narrow(2, r.query_begin, M).select(3, r.query_edge).add_(gq.select(3, d + 1));
      }
      if (key_band_grad.defined()) key_band_grad.narrow(2, r.key_begin, M).select(3, r.key_edge).add_(gk.select(3, d));
    }
  }
  // The strip: recomputed, then the gradients of a softmax under the whole rows' lse (zero in padded rows,
  // whose output gradient and delta are zero).
  const StripBlocks s = strip_blocks(p);
  const at::Tensor queries = query_blocks(p.q, s), keys = key_windows(p.k, s, n), values = key_windows(p.v, s, n);
  const at::Tensor probabilities = strip_probabilities(strip_scores(p, s, queries, keys), lse, s);
  const DropoutDraw strip_draw = part_draw(p.dropout, 2);
  const at::Tensor grad_blocks = query_blocks(grad_out, s);
  const at::Tensor grad_probabilities =
      strip_dropout(strip_of(at::matmul(grad_blocks, values.transpose(-1, -2)), s, p.width), strip_draw);
  const at::Tensor padded_delta = at::constant_pad_nd(delta, {0, s.padded_length() - T});
  const at::Tensor grad_scores = grad_probabilities.sub_(padded_delta.unsqueeze(-1)).mul_(probabilities);
  if (query_band_grad.defined()) query_band_grad.add_(grad_scores.narrow(2, 0, T));
  if (key_band_grad.defined()) {
    at::Tensor padded = at::zeros({B, N, key_band_rows(s, n), p.width}, p.q.options());
    key_band_strip(padded, s, n).copy_(grad_scores);
    key_band_grad.add_(padded.narrow(2, n, T));
  }
  const at::Tensor grad_score_blocks = blocks_of(grad_scores, s);
  dq.add_(at::matmul(grad_score_blocks, keys).view({B, N, s.padded_length(), d}).narrow(2, 0, T), p.scale);
  dk.add_(fold_windows(at::matmul(grad_score_blocks.transpose(-1, -2), queries), s, n, T), p.scale);
  const at::Tensor dropped = blocks_of(strip_dropout(probabilities, strip_draw), s);
  dv.add_(fold_windows(at::matmul(dropped.transpose(-1, -2), grad_blocks), s, n, T));
  AttentionGrads grads;
  grads.q = heads_last(dq);
  grads.k = heads_last(dk);
  grads.v = heads_last(dv);
  grads.query_band = query_band_grad;
  grads.key_band = key_band_grad;
  return grads;
}

}  // namespace cabert::kernels::regions
