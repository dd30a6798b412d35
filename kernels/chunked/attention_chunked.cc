// Blocks of query rows through ATen's batched products; kernels/chunked/attention_chunked.h has the scheme.
#include "kernels/chunked/attention_chunked.h"

#include <algorithm>
#include <limits>

#include "kernels/dropout_kernels.h"
#include "kernels/key_mask_facts.h"
#include "kernels/plain_aten.h"

namespace cabert::kernels::chunked {
namespace {

// One call's tensors as the blocks read them: (batch, head) pairs flattened, rows contiguous.
struct Problem {
  int64_t batch = 0, heads = 0, length = 0, head_size = 0, radius = 0, rows = 0;
  at::Tensor q, k, v;     // [B N, T, d]
  at::Tensor query_band;  // [B N, T, 2n+1] or undefined
  at::Tensor key_band_t;  // [B N, 2n+1, T] (the key band transposed: its entries along the key axis) or undefined
  at::Tensor masked;      // [B, 1, 1, T] bool: keys that take no part, or undefined when every key does
  at::Tensor uniform;     // [B, 1, 1, 1] bool: batch rows with no real key, or undefined when there is none
  // With bands, the keys beyond the radius on either side of a block's rows, as [B N, T, d+2] product operands
  // (edge_keys): [k, 1, the key band's edge entry, -inf at masked keys]; undefined when no block has such keys.
  at::Tensor left_keys, right_keys;
  double scale = 1;
  DropoutDraw dropout;
  bool bands() const { return query_band.defined() || key_band_t.defined(); }
};

// A block's scores split along the keys: those beyond the radius left of every row of the block ([0, begin)),
// the strip around its diagonal ([begin, end)) and those beyond the radius right of every row ([end, T)).
// Beyond the radius every entry of a band is its edge entry, so the scores of the two outer parts are one
// product each of [q scale, edge entry of the query band, 1] with [k, 1, edge entry of the key band]: the
// bands cost nothing there, and only the strip gathers them.
struct Strip {
  int64_t begin = 0, end = 0;
  int64_t width() const { return end - begin; }
};

// The key operand of an outer part: edge 0 (keys left of the radius, where r(j, i) = 2n in the key band) or
// 2n (keys right of it, where r(j, i) = 0).
at::Tensor edge_keys(const Problem& p, int64_t edge) {
  const int64_t BN = p.batch * p.heads, T = p.length, d = p.head_size;
  at::Tensor keys = at::empty({BN, T, d + 2}, p.k.options());
  keys.narrow(2, 0, d).copy_(p.k);
  keys.select(2, d).fill_(1);
  at::Tensor column = keys.select(2, d + 1);  // [B N, T]
  if (p.key_band_t.defined()) {
    column.copy_(p.key_band_t.select(1, 2 * p.radius - edge));
  } else {
    column.zero_();
  }
  if (p.masked.defined()) {
    column.view({p.batch, p.heads, T})
        .masked_fill_(p.masked.view({p.batch, 1, T}), -std::numeric_limits<double>::infinity());
  }
  return keys;
}

Problem problem_of(const AttentionInputs& in, int64_t block_elements) {
  Problem p;
  p.batch = in.q.size(0);
  p.heads = in.q.size(1);
  p.length = in.q.size(2);
  p.head_size = in.q.size(3);
  p.radius = in.radius;
  p.scale = in.scale;
  p.dropout = in.dropout;
  const int64_t BN = p.batch * p.heads, T = p.length, d = p.head_size, width = 2 * in.radius + 1;
  p.rows = block_rows(BN, T, block_elements);
  p.q = in.q.contiguous().view({BN, T, d});
  p.k = in.k.contiguous().view({BN, T, d});
  p.v = in.v.contiguous().view({BN, T, d});
  if (in.query_band.defined()) p.query_band = in.query_band.contiguous().view({BN, T, width});
  if (in.key_band.defined()) p.key_band_t = in.key_band.reshape({BN, T, width}).transpose(1, 2).contiguous();
  if (in.key_mask.defined()) {
    // A batch row without a real key attends to all of them alike: none of its keys is masked, its scores are 0.
    // Which of the two exist is asked of the device once per mask (kernels/key_mask_facts.h).
    const KeyMaskFacts facts = key_mask_facts(in.key_mask);
    const at::Tensor none_real = in.key_mask.any(1).logical_not();
    if (facts.keyless_row) p.uniform = none_real.view({p.batch, 1, 1, 1});
    if (facts.masked_key) {
      p.masked = in.key_mask.logical_not().logical_and(none_real.logical_not().unsqueeze(1)).view({p.batch, 1, 1, T});
    }
  }
  // Some block has keys beyond the radius when the first one ends n or more before T or the last one starts
  // past n (one block of the whole length has none).
  const int64_t last_block = std::max<int64_t>(0, T - 1) / p.rows * p.rows;
  if (p.bands() && (p.rows + p.radius < T || last_block > p.radius)) {
    p.left_keys = edge_keys(p, 0);
    p.right_keys = edge_keys(p, 2 * p.radius);
  }
  return p;
}

// A block of query rows i0 .. i0+R, its strip, and r(i, j) = clamp(j - i, -n, n) + n for its queries and the
// strip's keys ([R, width] int64; undefined without bands, when nothing reads it).
struct Block {
  int64_t i0 = 0, rows = 0;
  Strip strip;
  at::Tensor offsets;
};

Block block_of(const Problem& p, int64_t i0) {
  Block b;
  b.i0 = i0;
  b.rows = std::min(p.rows, p.length - i0);
  b.strip = {std::max<int64_t>(0, i0 - p.radius), std::min(p.length, i0 + b.rows + p.radius)};
  if (p.bands()) {
    const auto options = p.q.options().dtype(at::kLong);
    b.offsets = (at::arange(b.strip.begin, b.strip.end, options).unsqueeze(0) -
                 at::arange(i0, i0 + b.rows, options).unsqueeze(1))
                    .clamp_(-p.radius, p.radius)
                    .add_(p.radius);
  }
  return b;
}

// One outer part of a block's scores, into `out` ([B N, R, keys] within the block's scores): one product of
// [q scale, the query band's edge entry, 1] with the edge keys `keys` from key `j0` on.
void outer_scores(const Problem& p, const Block& b, int64_t edge, const at::Tensor& keys, int64_t j0, at::Tensor out) {
  const int64_t BN = p.batch * p.heads, d = p.head_size, i0 = b.i0, R = b.rows;
  at::Tensor rows = at::empty({BN, R, d + 2}, p.q.options());
  at::Tensor scaled_queries = rows.narrow(2, 0, d);
  at::mul_out(scaled_queries, p.q.narrow(1, i0, R), p.scale);
  if (p.query_band.defined()) {
    rows.select(2, d).copy_(p.query_band.narrow(1, i0, R).select(2, edge));
  } else {
    rows.select(2, d).zero_();
  }
  rows.select(2, d + 1).fill_(1);
  at::bmm_out(out, rows, keys.narrow(1, j0, out.size(2)).transpose(1, 2));
}

// The strip of a block's scores, into `out` ([B N, R, width] within the block's scores): scale q.k plus both
// bands' terms (query_band[i, r(i, j)] and key_band[j, r(j, i)] = key_band_t[r(j, i), j], r(j, i) = 2n - r(i, j))
// gathered along their diagonals, -inf at masked keys.
void strip_scores(const Problem& p, const Block& b, at::Tensor out) {
  const Strip& strip = b.strip;
  const at::Tensor& offsets = b.offsets;
  const int64_t BN = p.batch * p.heads, W = strip.width(), i0 = b.i0, R = b.rows;
  const auto index = offsets.expand({BN, R, W});
  if (p.query_band.defined()) at::gather_out(out, p.query_band.narrow(1, i0, R), 2, index);
  if (p.key_band_t.defined()) {
    const at::Tensor key_terms =
        p.key_band_t.narrow(2, strip.begin, W).gather(1, (2 * p.radius - offsets).expand({BN, R, W}));
    if (p.query_band.defined()) {
      out.add_(key_terms);
    } else {
      out.copy_(key_terms);
    }
  }
  out.baddbmm_(p.q.narrow(1, i0, R), p.k.narrow(1, strip.begin, W).transpose(1, 2), /*beta=*/1, /*alpha=*/p.scale);
  if (p.masked.defined()) {
    out.view({p.batch, p.heads, R, W})
        .masked_fill_(p.masked.narrow(3, strip.begin, W), -std::numeric_limits<double>::infinity());
  }
}

// The block's scores [B N, R, T] (the relative terms as above), -inf at masked keys, 0 in batch rows with no
// real key.
at::Tensor block_scores(const Problem& p, const Block& b) {
  const int64_t BN = p.batch * p.heads, T = p.length, R = b.rows;
  const Strip& strip = b.strip;
  at::Tensor s;
  if (p.bands()) {
    s = at::empty({BN, R, T}, p.q.options());
    if (strip.begin > 0) outer_scores(p, b, 0, p.left_keys, 0, s.narrow(2, 0, strip.begin));
    if (strip.end < T) {
      outer_scores(p, b, 2 * p.radius, p.right_keys, strip.end, s.narrow(2, strip.end, T - strip.end));
    }
    strip_scores(p, b, s.narrow(2, strip.begin, strip.width()));
  } else {
    s = at::bmm(p.q.narrow(1, b.i0, R), p.k.transpose(1, 2)).mul_(p.scale);
    if (p.masked.defined()) {
      s.view({p.batch, p.heads, R, T}).masked_fill_(p.masked, -std::numeric_limits<double>::infinity());
    }
  }
  if (p.uniform.defined()) s.view({p.batch, p.heads, R, T}).masked_fill_(p.uniform, 0);
  return s;
}

// Where the block's elements sit among the [B, N, T, T] draws: element (bh, r, j) is bh T T + (i0 + r) T + j.
DrawIndex block_draws(const Problem& p, int64_t i0) {
  const uint64_t T = static_cast<uint64_t>(p.length);
  return {static_cast<uint64_t>(i0) * T, T * T};
}

// The block's probabilities from its scores, in place: p_ij = exp(s_ij - lse_i) ([B N, R] log-sum-exp).
at::Tensor probabilities(at::Tensor& scores, const at::Tensor& logsumexp) {
  return scores.sub_(logsumexp.unsqueeze(-1)).exp_();
}

// The block's score gradients ds [B N, R, T] into the bands' gradients. Query band rows i0 .. i0+R: entry r of
// row i sums ds over the keys at offset r (the two edges over every key beyond the radius, the inner entries
// one key each); key band (transposed, [B N, 2n+1, T]): entry r of key j sums over the block's queries at
// offset r(j, i) = 2n - r(i, j) the same way. The outer parts of the block (Strip) add to the edges alone, by
// plain sums; in the strip, masked sums give the edges and gathers the inner entries. No atomics, the order
// fixed.
void add_band_grads(const Problem& p, const at::Tensor& ds, const Block& b, at::Tensor& query_band_grad,
                    at::Tensor& key_band_grad_t) {
  if (!query_band_grad.defined() && !key_band_grad_t.defined()) return;
  const int64_t n = p.radius, BN = p.batch * p.heads, T = p.length, i0 = b.i0, R = b.rows;
  at::Tensor query_rows = query_band_grad.defined() ? query_band_grad.narrow(1, i0, R) : at::Tensor();
  if (n == 0) {  // one entry, every key
    if (query_rows.defined()) query_rows.select(2, 0).add_(ds.sum(-1));
    if (key_band_grad_t.defined()) key_band_grad_t.select(1, 0).add_(ds.sum(1));
    return;
  }
  const Strip& strip = b.strip;
  const at::Tensor& offsets = b.offsets;
  const int64_t W = strip.width();
  if (strip.begin > 0) {  // keys left of the radius: r(i, j) = 0, r(j, i) = 2n
    const at::Tensor left = ds.narrow(2, 0, strip.begin);
    if (query_rows.defined()) query_rows.select(2, 0).add_(left.sum(-1));
    if (key_band_grad_t.defined()) key_band_grad_t.select(1, 2 * n).narrow(1, 0, strip.begin).add_(left.sum(1));
  }
  if (strip.end < T) {  // keys right of it: r(i, j) = 2n, r(j, i) = 0
    const at::Tensor right = ds.narrow(2, strip.end, T - strip.end);
    if (query_rows.defined()) query_rows.select(2, 2 * n).add_(right.sum(-1));
    if (key_band_grad_t.defined()) key_band_grad_t.select(1, 0).narrow(1, strip.end, T - strip.end).add_(right.sum(1));
  }
  const at::Tensor ds_strip = ds.narrow(2, strip.begin, W);
  const at::Tensor left = ds_strip * offsets.eq(0).to(ds.scalar_type());       // keys at j - i <= -n
  const at::Tensor right = ds_strip * offsets.eq(2 * n).to(ds.scalar_type());  // keys at j - i >= n
  const auto options = offsets.options();
  const at::Tensor inner = at::arange(1, 2 * n, options) - n;  // the inner offsets j - i (or i - j): 1-n .. n-1
  if (query_rows.defined()) {
    query_rows.select(2, 0).add_(left.sum(-1));
    query_rows.select(2, 2 * n).add_(right.sum(-1));
    const at::Tensor keys = at::arange(i0, i0 + R, options).unsqueeze(1) + inner;  // [R, 2n-1]: j = i + offset
    const at::Tensor inside = keys.ge(0).logical_and(keys.lt(T)).to(ds.scalar_type());
    const at::Tensor columns = (keys - strip.begin).clamp_(0, W - 1).expand({BN, R, 2 * n - 1});  // in the strip
    query_rows.narrow(2, 1, 2 * n - 1).add_(ds_strip.gather(2, columns) * inside);
  }
  if (key_band_grad_t.defined()) {
    key_band_grad_t.select(1, 0).narrow(1, strip.begin, W).add_(right.sum(1));  // r(j, i) = 0: i - j <= -n
    key_band_grad_t.select(1, 2 * n).narrow(1, strip.begin, W).add_(left.sum(1));
    // [2n-1, W]: the block row of query i = j + offset, for the strip's keys j (no other key has one)
    const at::Tensor rows = at::arange(strip.begin, strip.end, options).unsqueeze(0) + inner.unsqueeze(1) - i0;
    const at::Tensor inside = rows.ge(0).logical_and(rows.lt(R)).to(ds.scalar_type());
    key_band_grad_t.narrow(1, 1, 2 * n - 1)
        .narrow(2, strip.begin, W)
        .add_(ds_strip.gather(1, rows.clamp(0, R - 1).expand({BN, 2 * n - 1, W})) * inside);
  }
}

// [B N, T, d] rows -> [B, N, T, d] on [B, T, N, d] storage (the kernels' output layout).
at::Tensor heads_last_rows(const at::Tensor& rows, const Problem& p) {
  return heads_last(rows.view({p.batch, p.heads, p.length, p.head_size}));
}

}  // namespace

int64_t block_rows(int64_t batch_heads, int64_t length, int64_t block_elements) {
  const int64_t per_row = std::max<int64_t>(1, batch_heads * length);
  const int64_t rows = std::clamp<int64_t>(block_elements / per_row, 1, std::max<int64_t>(1, length));
  return rows >= length || rows < 64 ? rows : rows - rows % 64;
}

AttentionOutputs relative_attention_forward(const AttentionInputs& in, int64_t block_elements) {
  const PlainAten plain;
  const Problem p = problem_of(in, block_elements);
  const int64_t BN = p.batch * p.heads, T = p.length;
  AttentionOutputs result;
  at::Tensor out = at::empty({BN, T, p.head_size}, in.q.options());
  result.logsumexp = at::empty({p.batch, p.heads, T}, in.q.options());
  const at::Tensor lse_rows = result.logsumexp.view({BN, T});
  for (int64_t i0 = 0; i0 < T; i0 += p.rows) {
    const Block b = block_of(p, i0);
    const int64_t R = b.rows;
    at::Tensor s = block_scores(p, b);
    const at::Tensor lse = at::logsumexp(s, -1);
    at::Tensor probs = probabilities(s, lse);
    if (p.dropout.p > 0) probs = philox_dropout(probs, p.dropout, block_draws(p, i0));
    out.narrow(1, i0, R).copy_(at::bmm(probs, p.v));
    lse_rows.narrow(1, i0, R).copy_(lse);
  }
  result.out = heads_last_rows(out, p);
  return result;
}

AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward, int64_t block_elements) {
  const PlainAten plain;
  const Problem p = problem_of(in, block_elements);
  const int64_t BN = p.batch * p.heads, T = p.length, d = p.head_size, width = 2 * p.radius + 1;
  const at::Tensor dout = grad_out.contiguous().view({BN, T, d});
  const at::Tensor lse = forward.logsumexp.contiguous().view({BN, T});
  const at::Tensor delta = (grad_out * forward.out).sum(-1).view({BN, T});  // dO_i . O_i = sum_j p_ij z_ij dP_ij
  at::Tensor dq = at::empty({BN, T, d}, in.q.options()), dk = at::zeros_like(dq), dv = at::zeros_like(dq);
  at::Tensor query_band_grad, key_band_grad_t;
  if (p.query_band.defined()) query_band_grad = at::zeros({BN, T, width}, in.q.options());
  if (p.key_band_t.defined()) key_band_grad_t = at::zeros({BN, width, T}, in.q.options());
  for (int64_t i0 = 0; i0 < T; i0 += p.rows) {
    const Block b = block_of(p, i0);
    const int64_t R = b.rows;
    const at::Tensor dout_rows = dout.narrow(1, i0, R);
    at::Tensor s = block_scores(p, b);
    const at::Tensor probs = probabilities(s, lse.narrow(1, i0, R));
    const bool dropout = p.dropout.p > 0;
    const DrawIndex draws = block_draws(p, i0);
    dv.baddbmm_((dropout ? philox_dropout(probs, p.dropout, draws) : probs).transpose(1, 2), dout_rows);
    at::Tensor dp = at::bmm(dout_rows, p.v.transpose(1, 2));
    if (dropout) dp = philox_dropout(dp, p.dropout, draws);
    at::Tensor ds = dp.sub_(delta.narrow(1, i0, R).unsqueeze(-1)).mul_(probs);  // p (dP z / (1 - p) - delta)
    if (p.uniform.defined()) ds.view({p.batch, p.heads, R, T}).masked_fill_(p.uniform, 0);  // constant scores
    dq.narrow(1, i0, R).copy_(at::bmm(ds, p.k).mul_(p.scale));
    dk.baddbmm_(ds.transpose(1, 2), p.q.narrow(1, i0, R), /*beta=*/1, /*alpha=*/p.scale);
    add_band_grads(p, ds, b, query_band_grad, key_band_grad_t);
  }
  AttentionGrads grads;
  grads.q = heads_last_rows(dq, p);
  grads.k = heads_last_rows(dk, p);
  grads.v = heads_last_rows(dv, p);
  if (query_band_grad.defined()) grads.query_band = query_band_grad.view({p.batch, p.heads, T, width});
  if (key_band_grad_t.defined()) {
    grads.key_band = key_band_grad_t.transpose(1, 2).contiguous().view({p.batch, p.heads, T, width});
  }
  return grads;
}

}  // namespace cabert::kernels::chunked
