// What the attention kernels' tests share (tests/kernels/attention_*_test.cc): a case of bands, radius,
// padding and dropout over small double inputs laid out as the models pass them, and the comparison of
// outputs and gradients in double.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "kernels/attention_kernels.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert::testing {

struct AttentionCase {
  int64_t length, radius;
  bool query_band, key_band;
  int mask;  // 0 none, 1 ragged, 2 ragged with batch row 1 all padding
  double dropout;
  std::string name() const {
    return "T=" + std::to_string(length) + " n=" + std::to_string(radius) + (query_band ? " qband" : "") +
           (key_band ? " kband" : "") +
           (mask == 1   ? " masked"
            : mask == 2 ? " no-real-key"
                        : "") +
           (dropout > 0 ? " dropout" : "");
  }
};

inline constexpr int64_t kAttentionBatch = 3, kAttentionHeads = 2, kAttentionHeadSize = 8;

// Random contiguous q, k, v [B, N, T, d] and both bands [B, N, T, 2 radius + 1], drawn in that order; no mask,
// no dropout.
inline kernels::AttentionInputs banded_inputs(int64_t B, int64_t N, int64_t T, int64_t d, int64_t radius, double scale,
                                              const torch::TensorOptions& options = {}) {
  const int64_t width = 2 * radius + 1;
  kernels::AttentionInputs in;
  in.q = torch::randn({B, N, T, d}, options);
  in.k = torch::randn({B, N, T, d}, options);
  in.v = torch::randn({B, N, T, d}, options);
  in.query_band = torch::randn({B, N, T, width}, options);
  in.key_band = torch::randn({B, N, T, width}, options);
  in.radius = radius;
  in.scale = scale;
  return in;
}

// Long-sequence inputs in float, for the memory tests: B = 1, 4 heads of 16, radius 4, both bands.
inline kernels::AttentionInputs long_attention_inputs(int64_t length) {
  return banded_inputs(1, 4, length, 16, 4, 0.25);
}

// An output gradient for a case's inputs.
inline at::Tensor output_gradient(const AttentionCase& c) {
  return torch::randn({kAttentionBatch, kAttentionHeads, c.length, kAttentionHeadSize},
                      torch::TensorOptions().dtype(torch::kDouble));
}

inline kernels::AttentionInputs attention_inputs(const AttentionCase& c) {
  const int64_t B = kAttentionBatch, N = kAttentionHeads, d = kAttentionHeadSize, T = c.length,
                width = 2 * c.radius + 1;
  kernels::AttentionInputs in;
  // Heads as the models pass them: [B, N, T, d] views of [B, T, N, d] storage.
  in.q = torch::randn({B, T, N, d}, f64()).transpose(1, 2);
  in.k = torch::randn({B, T, N, d}, f64()).transpose(1, 2);
  in.v = torch::randn({B, T, N, d}, f64()).transpose(1, 2);
  if (c.query_band) in.query_band = torch::randn({B, N, T, width}, f64());
  if (c.key_band) in.key_band = torch::randn({B, N, T, width}, f64());
  if (c.mask > 0) {
    // Batch row 0 loses its last third, row 2 key 1; with mask 2 row 1 every key.
    in.key_mask = torch::ones({B, T}, torch::kBool);
    in.key_mask.index_put_({0, torch::indexing::Slice(std::max<int64_t>(1, T * 2 / 3), torch::indexing::None)}, false);
    if (T >= 4) in.key_mask.index_put_({2, 1}, false);
    if (c.mask == 2) in.key_mask.index_put_({1}, false);
  }
  in.radius = c.radius;
  in.scale = 0.37;
  in.dropout = {c.dropout, 0x5eed, 11};
  return in;
}

inline void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10))
      << what << ": max diff " << (got - want).abs().max().item<double>();
}

inline void expect_close_grads(const kernels::AttentionGrads& got, const kernels::AttentionGrads& want,
                               const std::string& where) {
  expect_close(got.q, want.q, where + " dq");
  expect_close(got.k, want.k, where + " dk");
  expect_close(got.v, want.v, where + " dv");
  expect_close(got.query_band, want.query_band, where + " d query band");
  expect_close(got.key_band, want.key_band, where + " d key band");
}

// A kernel's outputs and gradients for one output gradient.
struct KernelRun {
  kernels::AttentionOutputs outputs;
  kernels::AttentionGrads grads;
};

// The tiled CPU kernel's (whose agreement with the reference tests/kernels/attention_fused_test.cc establishes).
inline KernelRun tiled_run(const kernels::AttentionInputs& in, const at::Tensor& dout) {
  KernelRun run;
  run.outputs = kernels::relative_attention_forward(in);
  run.grads = kernels::relative_attention_backward(dout, in, run.outputs);
  return run;
}

// Output, log-sum-exp and every gradient in double, laid out as the CPU kernel's (heads-last storage, so that
// lib/ops adds the bands' gradients in place).
inline void expect_same_run(const KernelRun& got, const KernelRun& want, const std::string& where) {
  expect_close(got.outputs.out, want.outputs.out, where + " out");
  expect_close(got.outputs.logsumexp, want.outputs.logsumexp, where + " logsumexp");
  expect_close_grads(got.grads, want.grads, where);
  EXPECT_TRUE(got.grads.q.transpose(1, 2).is_contiguous() && got.outputs.out.transpose(1, 2).is_contiguous()) << where;
}

// The reference's gradients of <out, dout> for q, k, v and both bands (inputs that require grad).
inline kernels::AttentionGrads autograd_grads(const at::Tensor& out, const kernels::AttentionInputs& in,
                                              const at::Tensor& dout) {
  std::vector<at::Tensor> inputs = {in.q, in.k, in.v};
  if (in.query_band.defined()) inputs.push_back(in.query_band);
  if (in.key_band.defined()) inputs.push_back(in.key_band);
  const std::vector<at::Tensor> g = torch::autograd::grad({out}, inputs, {dout});
  kernels::AttentionGrads grads;
  grads.q = g[0];
  grads.k = g[1];
  grads.v = g[2];
  size_t next = 3;
  if (in.query_band.defined()) grads.query_band = g[next++];
  if (in.key_band.defined()) grads.key_band = g[next++];
  return grads;
}

// Every input leaf requires grad (the reference differentiates by autograd).
inline void require_grads(kernels::AttentionInputs& in) {
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.query_band, &in.key_band}) {
    if (t->defined()) *t = t->detach().requires_grad_();
  }
}

}  // namespace cabert::testing
