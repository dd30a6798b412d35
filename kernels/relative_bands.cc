#include "kernels/relative_bands.h"

namespace cabert::kernels {
namespace {

// [B, N, T, d] heads viewed on [B, T, N, d] storage (the projections' layout, and the kernels' gradients)
// -> that storage as [B T N, d] rows: a view when it is laid out so, else a copy.
at::Tensor token_head_rows(const at::Tensor& t) { return t.transpose(1, 2).reshape({-1, t.size(3)}); }

// grad_x += g W scale for a band's gradient g (in place on heads-last storage when grad_x is laid out so);
// returns grad_W = scale g^T x.
at::Tensor band_backward(const at::Tensor& band_grad, const at::Tensor& x, const at::Tensor& weight, double scale,
                         at::Tensor& grad_x) {
  const int64_t B = x.size(0), N = x.size(1), T = x.size(2), d = x.size(3);
  const at::Tensor g = band_grad.permute({0, 2, 1, 3}).reshape({B * T * N, -1});  // [B T N, 2n+1]
  at::Tensor storage = grad_x.transpose(1, 2);
  if (storage.is_contiguous()) {
    storage.view({-1, d}).addmm_(g, weight, /*beta=*/1, /*alpha=*/scale);
  } else {
    grad_x = grad_x + at::mm(g, weight * scale).view({B, T, N, d}).transpose(1, 2);
  }
  return at::mm(g.t(), token_head_rows(x)).mul_(scale);
}

}  // namespace

at::Tensor band_by_matmul(const at::Tensor& x, const at::Tensor& weight, double scale) {
  return at::matmul(x, weight.t()) * scale;
}

at::Tensor band_over_storage(const at::Tensor& x, const at::Tensor& weight, double scale) {
  const int64_t B = x.size(0), N = x.size(1), T = x.size(2);
  return at::mm(token_head_rows(x), weight.t() * scale).view({B, T, N, -1}).permute({0, 2, 1, 3}).contiguous();
}

Bands relative_bands(const at::Tensor& q, const at::Tensor& k, const RelativeWeights& weights, int64_t radius,
                     double scale, BandProduct product) {
  Bands bands;
  const int64_t B = q.size(0), N = q.size(1), T = q.size(2), width = 2 * radius + 1;
  if (weights.query.defined()) bands.query = product(q, weights.query, scale);
  if (weights.beta.defined()) {
    const at::Tensor beta = weights.beta.view({1, N, 1, width});
    bands.query = bands.query.defined() ? bands.query + beta : beta.expand({B, N, T, width});
  }
  if (weights.key.defined()) bands.key = product(k, weights.key, scale);
  return bands;
}

void band_grads_to_weights(const AttentionInputs& in, AttentionGrads& grads) {
  if (in.weights.query.defined()) {
    grads.query_weight = band_backward(grads.query_band, in.q, in.weights.query, in.scale, grads.q);
  }
  if (in.weights.beta.defined()) grads.beta = grads.query_band.sum(at::IntArrayRef{0, 2});
  if (in.weights.key.defined()) {
    grads.key_weight = band_backward(grads.key_band, in.k, in.weights.key, in.scale, grads.k);
  }
  grads.query_band = at::Tensor();
  grads.key_band = at::Tensor();
}

}  // namespace cabert::kernels
