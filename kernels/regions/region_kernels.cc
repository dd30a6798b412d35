// PyTorch's fused attention kernels as the regions' kernel (kernels/regions/attention_regions.h).
#include <ATen/Context.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>

#include <limits>
#include <optional>

#include "kernels/regions/attention_regions.h"
#include "kernels/seeded_generator.h"
#include "lib/core/errors.h"

namespace cabert::kernels::regions {
namespace {

// PyTorch's kernels check little of what they are handed (the CUDA backward nothing of grad_out's, out's or
// the log-sum-exp's dtype and layout): a mismatch would give silently wrong gradients, so both backends check.
void expect_operand(const char* name, const at::Tensor& t, const at::Tensor& q, int64_t last_dim) {
  const bool ok = t.defined() && t.scalar_type() == q.scalar_type() && t.device() == q.device() && t.dim() == 4 &&
                  t.size(0) == q.size(0) && t.size(1) == q.size(1) && t.size(2) == q.size(2) &&
                  (last_dim < 0 || t.size(3) == last_dim);
  if (!ok) {
    throw Error(str("region kernel: ", name, " is ",
                    t.defined() ? str(t.scalar_type(), " ", t.sizes(), " on ", t.device()) : std::string("undefined"),
                    "; expected ", q.scalar_type(), " [", q.size(0), ", ", q.size(1), ", ", q.size(2), ", ",
                    last_dim < 0 ? std::string("*") : std::to_string(last_dim), "] on ", q.device()));
  }
}

void check_operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  expect_operand("k", k, q, q.size(3));
  expect_operand("v", v, q, -1);
}

void check_backward_operands(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& out, const at::Tensor& logsumexp) {
  check_operands(q, k, v);
  expect_operand("grad_out", grad_out, q, v.size(3));
  expect_operand("out", out, q, v.size(3));
  if (!logsumexp.defined() || !at::isFloatingType(logsumexp.scalar_type()) ||
      logsumexp.sizes() != at::IntArrayRef({q.size(0), q.size(1), q.size(2)})) {
    throw Error(str("region kernel: logsumexp is ",
                    logsumexp.defined() ? str(logsumexp.scalar_type(), " ", logsumexp.sizes()) : "undefined",
                    "; expected a floating [", q.size(0), ", ", q.size(1), ", ", q.size(2), "]"));
  }
}

// ---- CPU: flash attention (no dropout; q, k and v of one head size) ----

at::Tensor padded_to(const at::Tensor& x, int64_t size) {
  return x.size(3) == size ? x : at::constant_pad_nd(x, {0, size - x.size(3)});
}

RegionForward cpu_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DropoutDraw& draw) {
  if (draw.p > 0) throw UsageError("relative_attention: PyTorch's CPU flash attention takes no dropout");
  check_operands(q, k, v);
  const int64_t head_size = q.size(3);
  auto [out, logsumexp] = at::_scaled_dot_product_flash_attention_for_cpu(
      q, k, padded_to(v, head_size), /*dropout_p=*/0.0, /*is_causal=*/true, /*attn_mask=*/std::nullopt, /*scale=*/1.0);
  return {out.narrow(3, 0, v.size(3)), logsumexp, at::Tensor()};
}

RegionGrads cpu_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& out, const at::Tensor& logsumexp, const DropoutDraw&, const at::Tensor&) {
  check_backward_operands(grad_out, q, k, v, out, logsumexp);
  const int64_t head_size = q.size(3);
  auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      padded_to(grad_out, head_size), q, k, padded_to(v, head_size), padded_to(out, head_size),
      logsumexp.to(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat).contiguous(), /*dropout_p=*/0.0,
      /*is_causal=*/true, /*attn_mask=*/std::nullopt,
      /*scale=*/1.0);
  return {gq, gk, gv.narrow(3, 0, v.size(3))};
}

// ---- CUDA: memory-efficient attention (its dropout from the device's Philox generator) ----

// The efficient kernel's log-sum-exp rows are padded to a multiple of 32; its backward reads them so.
constexpr int64_t kLogsumexpAlignment = 32;

// The values' width the kernel gets: a multiple of 8 (its aligned kernels, and PyTorch's own dispatch, want
// one), zero columns added.
int64_t value_width(const at::Tensor& v) { return (v.size(3) + 7) / 8 * 8; }

RegionForward cuda_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DropoutDraw& draw) {
  check_operands(q, k, v);
  std::optional<SeededGenerator> seeded;  // the masks a function of cabert's seed (kernels/seeded_generator.h)
  if (draw.p > 0) seeded.emplace(q.device(), draw.seed);
  auto [out, logsumexp, philox_seed, philox_offset] = at::_scaled_dot_product_efficient_attention(
      q, k, padded_to(v, value_width(v)), /*attn_bias=*/std::nullopt, /*compute_log_sumexp=*/true, draw.p,
      /*is_causal=*/true, /*scale=*/1.0);
  at::Tensor rng;
  if (draw.p > 0) {
    rng =
        at::stack({philox_seed.to(at::kCPU, at::kLong).reshape({}), philox_offset.to(at::kCPU, at::kLong).reshape({})});
  }
  return {out.narrow(3, 0, v.size(3)), logsumexp.narrow(2, 0, q.size(2)), rng};
}

RegionGrads cuda_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& logsumexp, const DropoutDraw& draw,
                          const at::Tensor& rng) {
  check_backward_operands(grad_out, q, k, v, out, logsumexp);
  const int64_t B = q.size(0), N = q.size(1), M = q.size(2);
  // The kernel reads the log-sum-exp in rows padded to 32 (+inf past M, as its forward writes them) and the
  // output with the row stride of its forward's [B, M, N, width] storage (the padded values' width).
  const int64_t padded = (M + kLogsumexpAlignment - 1) / kLogsumexpAlignment * kLogsumexpAlignment;
  at::Tensor lse = at::full({B, N, padded}, std::numeric_limits<float>::infinity(), q.options().dtype(at::kFloat));
  lse.narrow(2, 0, M).copy_(logsumexp);
  const int64_t width = value_width(v);
  const at::Tensor out_rows = at::zeros({B, M, N, width}, out.options()).transpose(1, 2);
  out_rows.narrow(3, 0, out.size(3)).copy_(out);
  // Unread without dropout; with it the forward's CPU scalars.
  at::Tensor philox_seed = at::zeros({}, at::kLong), philox_offset = at::zeros({}, at::kLong);
  if (draw.p > 0) {
    philox_seed = rng[0].clone();
    philox_offset = rng[1].clone();
  }
  auto [gq, gk, gv, gbias] = at::_scaled_dot_product_efficient_attention_backward(
      padded_to(grad_out, width), q, k, padded_to(v, width), /*attn_bias=*/at::Tensor(), out_rows, lse, philox_seed,
      philox_offset, draw.p, {true, true, true, false}, /*is_causal=*/true, /*scale=*/1.0);
  return {gq, gk, gv.narrow(3, 0, v.size(3))};
}

}  // namespace

RegionKernel pytorch_region_kernel(const at::Tensor& q) {
  if (q.is_cuda()) return {cuda_forward, cuda_backward};
  return {cpu_forward, cpu_backward};
}

}  // namespace cabert::kernels::regions
