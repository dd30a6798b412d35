#include "kernels/attention_kernels.h"

#include <algorithm>
#include <atomic>
#include <tuple>

#include "kernels/build_info.h"
#include "kernels/chunked/attention_chunked.h"
#include "kernels/cpu/attention_cpu.h"
#ifdef CABERT_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif
#include "kernels/op_checks.h"
#include "kernels/regions/attention_regions.h"
#include "kernels/relative_bands.h"
#include "lib/core/errors.h"

namespace cabert::kernels {
namespace {

constexpr const char* kAttentionOp = "relative_attention";

// Last dimension contiguous (the kernel reads rows with any other strides).
at::Tensor rows_contiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

AttentionInputs checked(const AttentionInputs& in) {
  require(in.q.defined() && in.q.dim() == 4, kAttentionOp,
          str("expected q of shape [B, N, T, d], got ", shape_of(in.q)));
  require(in.q.scalar_type() == at::kFloat || in.q.scalar_type() == at::kDouble, kAttentionOp,
          str("expected q to be float or double, got ", in.q.scalar_type()));
  require(in.q.is_cpu() || in.q.is_cuda(), kAttentionOp, str("expected CPU or CUDA tensors, got q on ", in.q.device()));
  if (in.q.is_cuda()) require_cuda_build(kAttentionOp);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"k", in.k}, {"v", in.v}}) {
    require(t.defined() && t.sizes() == in.q.sizes(), kAttentionOp,
            str("expected ", name, " of shape ", shape_of(in.q), " (as q), got ", shape_of(t)));
    require(t.scalar_type() == in.q.scalar_type() && t.device() == in.q.device(), kAttentionOp,
            str("expected ", name, " of dtype ", in.q.scalar_type(), " on ", in.q.device(), " (as q)"));
  }
  require(in.radius >= 0, kAttentionOp, str("expected a radius >= 0, got ", in.radius));
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2);
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor&>{"query_band", in.query_band}, {"key_band", in.key_band}}) {
    if (!t.defined()) continue;
    require(
        t.sizes() == at::IntArrayRef({B, N, T, 2 * in.radius + 1}), kAttentionOp,
        str("expected ", name, " of shape [", B, ", ", N, ", ", T, ", ", 2 * in.radius + 1, "], got ", shape_of(t)));
    require(t.scalar_type() == in.q.scalar_type() && t.device() == in.q.device(), kAttentionOp,
            str("expected ", name, " of dtype ", in.q.scalar_type(), " on ", in.q.device(), " (as q)"));
  }
  const int64_t width = 2 * in.radius + 1, d = in.q.size(3);
  require(!(in.weights.any() && (in.query_band.defined() || in.key_band.defined())), kAttentionOp,
          "expected the relative terms as bands or as weights, got both");
  for (const auto& [name, t, rows, cols] :
       {std::tuple<const char*, const at::Tensor&, int64_t, int64_t>{"W^C", in.weights.query, width, d},
        {"beta", in.weights.beta, N, width},
        {"W^K'", in.weights.key, width, d}}) {
    if (!t.defined()) continue;
    require(t.sizes() == at::IntArrayRef({rows, cols}), kAttentionOp,
            str("expected ", name, " of shape [", rows, ", ", cols, "], got ", shape_of(t)));
    require(t.scalar_type() == in.q.scalar_type() && t.device() == in.q.device(), kAttentionOp,
            str("expected ", name, " of dtype ", in.q.scalar_type(), " on ", in.q.device(), " (as q)"));
  }
  if (in.key_mask.defined()) {
    require(
        in.key_mask.sizes() == at::IntArrayRef({B, T}) && in.key_mask.scalar_type() == at::kBool, kAttentionOp,
        str("expected key_mask [", B, ", ", T, "] bool, got ", shape_of(in.key_mask), " ", in.key_mask.scalar_type()));
  }
  require(in.dropout.p >= 0 && in.dropout.p < 1, kAttentionOp,
          str("expected a dropout probability in [0, 1), got ", in.dropout.p));
  AttentionInputs c = in;
  c.q = rows_contiguous(in.q);
  c.k = rows_contiguous(in.k);
  c.v = rows_contiguous(in.v);
  if (c.query_band.defined()) c.query_band = c.query_band.contiguous();
  if (c.key_band.defined()) c.key_band = c.key_band.contiguous();
  if (c.key_mask.defined()) c.key_mask = c.key_mask.to(in.q.device()).contiguous();
  for (at::Tensor* t : {&c.weights.query, &c.weights.beta, &c.weights.key}) {
    if (t->defined()) *t = t->contiguous();
  }
  return c;
}

// The inputs with weights turned into bands (the routes other than the CPU's take bands), either computed or
// the forward's.
AttentionInputs with_bands(const AttentionInputs& in, const Bands& bands) {
  AttentionInputs banded = in;
  banded.weights = RelativeWeights{};
  banded.query_band = bands.query;
  banded.key_band = bands.key;
  return banded;
}

std::atomic<CudaAttentionRoute> route{CudaAttentionRoute::kAuto};

}  // namespace

void set_cuda_attention_route(CudaAttentionRoute r) { route = r; }
CudaAttentionRoute cuda_attention_route() { return route; }
CudaAttentionRoute parse_cuda_attention_route(const std::string& name) {
  if (name == "auto") return CudaAttentionRoute::kAuto;
  if (name == "regions") return CudaAttentionRoute::kRegions;
  if (name == "blocks") return CudaAttentionRoute::kBlocks;
  if (name == "tiles") return CudaAttentionRoute::kTiles;
  throw UsageError(str("--cuda-attention: expected auto, regions, blocks or tiles, got '", name, "'"));
}
bool cuda_attention_takes_scores(int64_t batch, int64_t heads, int64_t length) {
  if (route != CudaAttentionRoute::kAuto) return false;
  // batch heads length^2 <= kAutoScoreEntries, without overflowing for any length
  const int64_t rows = batch * heads;
  return rows > 0 && length <= kAutoScoreEntries / rows / std::max<int64_t>(length, 1);
}

AttentionOutputs relative_attention_forward(const AttentionInputs& in) {
  AttentionInputs c = checked(in);
  if (c.q.is_cpu()) return cpu::relative_attention_forward(c);
  const bool from_weights = c.weights.any();
  if (from_weights) c = with_bands(c, relative_bands(c.q, c.k, c.weights, c.radius, c.scale));
  AttentionOutputs result;
#ifdef CABERT_WITH_CUDA
  if (route == CudaAttentionRoute::kTiles && cuda::tiled_attention_takes(c)) result = cuda::tiled_attention_forward(c);
#endif
  if (!result.out.defined()) {  // the tiles did not take it
    result = route != CudaAttentionRoute::kBlocks && route != CudaAttentionRoute::kTiles && regions::takes(c)
                 ? regions::relative_attention_forward(c, regions::pytorch_region_kernel(c.q))
                 : chunked::relative_attention_forward(c);
  }
  if (from_weights) {
    result.query_band = c.query_band;
    result.key_band = c.key_band;
  }
  return result;
}

AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward) {
  require(grad_out.sizes() == in.q.sizes(), kAttentionOp,
          str("expected a gradient of shape ", shape_of(in.q), ", got ", shape_of(grad_out)));
  AttentionOutputs saved = forward;
  saved.out = rows_contiguous(forward.out);
  saved.logsumexp = forward.logsumexp.contiguous();
  const AttentionInputs c = checked(in);
  const at::Tensor grad = rows_contiguous(grad_out.to(in.q.scalar_type()));
  if (c.q.is_cpu()) return cpu::relative_attention_backward(grad, c, saved);
  AttentionInputs banded = c;
  if (c.weights.any()) {  // the bands this route's forward computed from the weights
    require(saved.query_band.defined() == (c.weights.query.defined() || c.weights.beta.defined()) &&
                saved.key_band.defined() == c.weights.key.defined(),
            kAttentionOp,
            "expected the forward's bands (AttentionOutputs::query_band, key_band) for weights on this route");
    banded = with_bands(c, Bands{saved.query_band, saved.key_band});
  }
  AttentionGrads grads;
#ifdef CABERT_WITH_CUDA
  if (saved.tiled) grads = cuda::tiled_attention_backward(grad, banded, saved);
#endif
  if (!grads.q.defined()) {  // the forward took the regions (their dropout states in rng) or the blocks
    grads = saved.rng.defined()
                ? regions::relative_attention_backward(grad, banded, saved, regions::pytorch_region_kernel(c.q))
                : chunked::relative_attention_backward(grad, banded, saved);
  }
  if (c.weights.any()) band_grads_to_weights(c, grads);
  return grads;
}

}  // namespace cabert::kernels
