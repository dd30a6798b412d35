#include "lib/ops/attention_ops.h"

#include <ATen/record_function.h>

#include <optional>

#include "kernels/attention_kernels.h"
#include "kernels/build_info.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/relative_bands.h"
#include "kernels/seeded_generator.h"
#include "lib/ops/dropout_ops.h"
#include "lib/ops/kernel_path.h"
#include "lib/ops/mixed_precision.h"
#include "lib/ops/optional_tensor.h"

namespace cabert::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using kernels::Bands;

kernels::AttentionInputs attention_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const Bands& bands, const torch::Tensor& mask, int64_t radius, double scale,
                                          const kernels::DropoutDraw& dropout,
                                          std::optional<at::ScalarType> fused_kernel_dtype = std::nullopt) {
  kernels::AttentionInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  in.query_band = bands.query;
  in.key_band = bands.key;
  in.key_mask = mask;
  in.radius = radius;
  in.scale = scale;
  in.dropout = dropout;
  in.fused_kernel_dtype = fused_kernel_dtype;
  return in;
}

kernels::RelativeWeights weights_of(const RelativePositionTerms& relative) {
  return {relative.query_weight, relative.beta, relative.key_weight};
}

// A dtype through the autograd Function's int64 arguments: -1 none.
int64_t dtype_code(std::optional<at::ScalarType> dtype) { return dtype ? static_cast<int64_t>(*dtype) : -1; }
std::optional<at::ScalarType> dtype_of(int64_t code) {
  return code < 0 ? std::nullopt : std::optional(static_cast<at::ScalarType>(code));
}

// The fused kernel (CPU or CUDA) with its own backward. It hands the kernels the relative weights themselves
// (kernels/attention_kernels.h: the CPU kernel computes the bands per tile and maps their gradients to q, k and
// the weights inside its tiles; the CUDA routes with one product each), rather than bands through autograd (a
// copy of q, separate scale and add passes, a second q gradient to accumulate). Saves q, k, v, the weights, the
// output and the row log-sum-exp (linear in T; on CUDA the bands too), never a T x T tensor.
struct RelativeAttentionFunction : public torch::autograd::Function<RelativeAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const std::optional<torch::Tensor>& query_weight,
                               const std::optional<torch::Tensor>& beta, const std::optional<torch::Tensor>& key_weight,
                               const std::optional<torch::Tensor>& mask, int64_t radius, double scale, double dropout_p,
                               int64_t seed, int64_t fused_kernel_dtype) {
    RECORD_FUNCTION("cabert::relative_attention", c10::ArrayRef<const c10::IValue>{});  // named in profiles
    kernels::DropoutDraw dropout;
    dropout.p = dropout_p;
    dropout.seed = static_cast<uint64_t>(seed);
    const torch::Tensor wq = query_weight.value_or(torch::Tensor()), b = beta.value_or(torch::Tensor()),
                        wk = key_weight.value_or(torch::Tensor());
    const torch::Tensor key_mask = mask.value_or(torch::Tensor());
    kernels::AttentionInputs in =
        attention_inputs(q, k, v, Bands{}, key_mask, radius, scale, dropout, dtype_of(fused_kernel_dtype));
    in.weights = {wq, b, wk};
    kernels::AttentionOutputs result = kernels::relative_attention_forward(in);
    ctx->save_for_backward(
        {q, k, v, result.query_band, result.key_band, key_mask, result.out, result.logsumexp, wq, b, wk, result.rng});
    ctx->saved_data["radius"] = radius;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dropout_p"] = dropout_p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["fused_kernel_dtype"] = fused_kernel_dtype;
    ctx->saved_data["tiled"] = result.tiled;
    return result.out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &wq = saved[8], &b = saved[9], &wk = saved[10];
    kernels::DropoutDraw dropout;
    dropout.p = ctx->saved_data["dropout_p"].toDouble();
    dropout.seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const double scale = ctx->saved_data["scale"].toDouble();
    kernels::AttentionInputs in =
        attention_inputs(q, k, saved[2], Bands{}, saved[5], ctx->saved_data["radius"].toInt(), scale, dropout,
                         dtype_of(ctx->saved_data["fused_kernel_dtype"].toInt()));
    in.weights = {wq, b, wk};
    kernels::AttentionOutputs forward{saved[6], saved[7], saved[11],
                                      saved[3], saved[4], ctx->saved_data["tiled"].toBool()};
    FloatRegion region;  // a backward run under autocast keeps the bands' products in float32, as the forward's
    kernels::AttentionGrads grads = kernels::relative_attention_backward(grad_outputs[0], in, forward);
    return {grads.q,         grads.k,         grads.v,         grads.query_weight, grads.beta,      grads.key_weight,
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),    torch::Tensor(), torch::Tensor()};
  }
};

// PyTorch's SDPA. Its dropout on CUDA draws from the device's generator, which no checkpoint keeps: seeded from
// the call's seed for the call, its masks repeat and resume with the run (kernels/seeded_generator.h).
torch::Tensor seeded_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const std::optional<torch::Tensor>& mask_or_bias, const kernels::DropoutDraw& dropout,
                          double scale) {
  std::optional<kernels::SeededGenerator> seeded;
  if (dropout.p > 0 && q.is_cuda()) seeded.emplace(q.device(), dropout.seed);
  return at::scaled_dot_product_attention(q, k, v, mask_or_bias, dropout.p, /*is_causal=*/false, scale);
}

// composite_attention with its dropout seed drawn.
torch::Tensor attention_with_draw(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const RelativePositionTerms& relative, const torch::Tensor& mask, double scale,
                                  const kernels::DropoutDraw& dropout, torch::Tensor* probabilities,
                                  std::optional<at::ScalarType> fused_kernel_dtype = std::nullopt) {
  const int64_t B = q.size(0), T = q.size(2);
  const bool fused = kernel_path() == KernelPath::kFused && probabilities == nullptr;
  // PyTorch's CPU flash kernel takes no dropout: with dropout SDPA falls back to its math path (T x T scores,
  // softmax and mask all stored, the mask drawn one element at a time), so CPU training takes cabert's kernel.
  const bool sdpa_drops_to_math = q.is_cpu() && dropout.p > 0;
  if (fused && !relative.any() && !sdpa_drops_to_math) {
    const std::optional<torch::Tensor> keys = mask.defined() ? std::optional(mask.view({B, 1, 1, T})) : std::nullopt;
    return seeded_sdpa(q, k, v, keys, dropout, scale);
  }
  // cabert's own kernels: on the CPU, and on CUDA in a build with CUDA kernels (their Philox dropout) unless the
  // problem is small enough for the reference's T x T scores to be faster there
  // (kernels::cuda_attention_takes_scores); a CUDA tensor in a build without them takes SDPA with the relative
  // terms as a bias (quadratic).
  const bool cuda_kernels = q.is_cuda() && kernels::built_with_cuda();
  const bool scores = cuda_kernels && kernels::cuda_attention_takes_scores(B, q.size(1), T);
  const bool own_kernel = (q.is_cpu() || cuda_kernels) && !scores;
  if (fused && own_kernel && needs_float_region({q, k, v, relative.query_weight, relative.beta, relative.key_weight})) {
    // Float32 inside; CUDA's regions still hand PyTorch's fused kernel autocast's dtype.
    const std::optional<at::ScalarType> reduced =
        reduced_precision({q, k, v, relative.query_weight, relative.beta, relative.key_weight});
    FloatRegion region;
    RelativePositionTerms relative32{to_float32(relative.query_weight), to_float32(relative.beta),
                                     to_float32(relative.key_weight), relative.radius};
    return attention_with_draw(to_float32(q), to_float32(k), to_float32(v), relative32, mask, scale, dropout, nullptr,
                               reduced);
  }
  if (fused && own_kernel) {
    return RelativeAttentionFunction::apply(q, k, v, optional_tensor(relative.query_weight),
                                            optional_tensor(relative.beta), optional_tensor(relative.key_weight),
                                            optional_tensor(mask), relative.radius, scale, dropout.p,
                                            static_cast<int64_t>(dropout.seed), dtype_code(fused_kernel_dtype));
  }
  // The reference, and the SDPA fallback: bands through autograd.
  const Bands bands =
      kernels::relative_bands(q, k, weights_of(relative), relative.radius, scale, kernels::band_by_matmul);
  const kernels::AttentionInputs in = attention_inputs(q, k, v, bands, mask, relative.radius, scale, dropout);
  if (!fused || scores) return kernels::reference::relative_attention(in, probabilities);
  // CUDA without cabert's kernels: the relative terms as SDPA's additive bias (PyTorch's memory-efficient
  // kernel, its dropout).
  torch::Tensor bias = kernels::reference::relative_attention_bias(in).to(q.scalar_type());
  return seeded_sdpa(q, k, v, bias, dropout, scale);
}

}  // namespace

torch::Tensor composite_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const RelativePositionTerms& relative, const torch::Tensor& mask, double scale,
                                  double dropout_p, torch::Tensor* probabilities) {
  // One seed per call in training, whichever path runs, so that the dropouts after this one draw the same masks
  // on every path. SDPA's paths leave it unused: their masks come from PyTorch's own generator (on CUDA its
  // Philox state), so there `--kernels fused` and `reference` drop different attention probabilities. CUDA's
  // composite attention in float (kernels/regions) seeds its parts' masks with it, which are not the
  // reference's either.
  return attention_with_draw(q, k, v, relative, mask, scale, draw_dropout(dropout_p), probabilities);
}

}  // namespace cabert::ops
