// The per-row maths the CUDA attention kernel runs (kernels/attention_math.h), executed on the CPU row by row as
// the CUDA threads index it, against the fused CPU kernel (itself checked against the reference and finite
// differences in attention_fused_test.cc): output, log-sum-exp and every gradient in double, with and without
// each band, ragged masks, a batch element with no real key, dropout, radius 0 and radius past T. This is how the
// CUDA arithmetic is tested on a machine without a GPU (the launches themselves are untested here).
#include <gtest/gtest.h>

#include "kernels/attention_kernels.h"
#include "kernels/attention_math.h"

namespace cabert {
namespace {

namespace am = kernels::attention_math;

torch::TensorOptions f64() { return torch::TensorOptions().dtype(torch::kDouble); }

struct MathCase {
  int64_t batch, heads, length, head_size, radius;
  bool query_band, key_band, masked;
  double dropout;
};

// Batch element 0 keeps a ragged real prefix, the last one has no real key at all (uniform attention).
torch::Tensor mask_with_an_empty_row(int64_t batch, int64_t length) {
  auto mask = torch::ones({batch, length}, torch::kBool);
  if (length >= 3) mask.index_put_({0, torch::indexing::Slice(length - 2, torch::indexing::None)}, false);
  if (batch >= 2) mask[batch - 1].fill_(false);
  return mask;
}

// The call as the CUDA kernel sees it (kernels/cuda/attention_cuda.cu fills the same struct); am::head_view then
// indexes (batch, head) as its threads do.
am::Heads<double> heads_of(const kernels::AttentionInputs& in, const torch::Tensor& has_real_key) {
  am::Heads<double> p;
  p.q = in.q.data_ptr<double>();
  p.k = in.k.data_ptr<double>();
  p.v = in.v.data_ptr<double>();
  p.query_band = in.query_band.defined() ? in.query_band.data_ptr<double>() : nullptr;
  p.key_band = in.key_band.defined() ? in.key_band.data_ptr<double>() : nullptr;
  p.mask = in.key_mask.defined() ? in.key_mask.data_ptr<bool>() : nullptr;
  p.has_real_key = has_real_key.defined() ? has_real_key.data_ptr<bool>() : nullptr;
  p.batch = in.q.size(0);
  p.heads = in.q.size(1);
  p.length = in.q.size(2);
  p.head_size = in.q.size(3);
  p.radius = in.radius;
  p.scale = in.scale;
  p.dropout_p = static_cast<float>(in.dropout.p);
  p.kept_scale = 1.0 / (1.0 - in.dropout.p);
  p.seed = in.dropout.seed;
  p.offset = in.dropout.offset;
  return p;
}

void expect_close(const torch::Tensor& rows, const torch::Tensor& kernel, const std::string& what) {
  ASSERT_EQ(rows.sizes(), kernel.sizes()) << what;
  EXPECT_TRUE(torch::allclose(rows, kernel, 1e-10, 1e-10))
      << what << ": max diff " << (rows - kernel).abs().max().item<double>();
}

void check_case(const MathCase& c) {
  const std::string name = "B=" + std::to_string(c.batch) + " T=" + std::to_string(c.length) + " n=" +
                           std::to_string(c.radius) + (c.query_band ? " qband" : "") + (c.key_band ? " kband" : "") +
                           (c.masked ? " masked" : "") + " p=" + std::to_string(c.dropout);
  const int64_t B = c.batch, N = c.heads, T = c.length, d = c.head_size, width = 2 * c.radius + 1;
  kernels::AttentionInputs in;
  in.q = torch::randn({B, N, T, d}, f64());
  in.k = torch::randn({B, N, T, d}, f64());
  in.v = torch::randn({B, N, T, d}, f64());
  if (c.query_band) in.query_band = torch::randn({B, N, T, width}, f64());
  if (c.key_band) in.key_band = torch::randn({B, N, T, width}, f64());
  if (c.masked) in.key_mask = mask_with_an_empty_row(B, T);
  in.radius = c.radius;
  in.scale = 0.37;
  in.dropout = {c.dropout, 0x1234abcdULL, 7};
  const torch::Tensor dout = torch::randn({B, N, T, d}, f64());
  const kernels::AttentionOutputs fused = kernels::relative_attention_forward(in);
  const kernels::AttentionGrads grads = kernels::relative_attention_backward(dout, in, fused);

  const torch::Tensor has_real_key = c.masked ? in.key_mask.any(1).contiguous() : torch::Tensor();
  const am::Heads<double> heads = heads_of(in, has_real_key);
  torch::Tensor out = torch::zeros({B, N, T, d}, f64()), lse = torch::zeros({B, N, T}, f64());
  torch::Tensor dq = torch::zeros({B, N, T, d}, f64()), dk = torch::zeros_like(dq), dv = torch::zeros_like(dq);
  torch::Tensor qbg = torch::zeros({B, N, T, width}, f64()), kbg = torch::zeros({B, N, T, width}, f64());
  const torch::Tensor delta = (dout * fused.out).sum(-1).contiguous();
  const torch::Tensor dout_c = dout.contiguous();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < N; ++h) {
      const am::HeadView<double> view = am::head_view(heads, b, h);
      const int64_t rows = (b * N + h) * T;
      double* lse_row = lse.data_ptr<double>() + rows;
      for (int64_t i = 0; i < T; ++i) {  // what the forward threads do, one query row each
        lse_row[i] = am::forward_row(view, i, out.data_ptr<double>() + (rows + i) * d);
      }
      for (int64_t i = 0; i < T; ++i) {  // the query-side backward threads
        am::backward_query_row(view, i, dout_c.data_ptr<double>() + (rows + i) * d, lse_row[i],
                               delta.data_ptr<double>()[rows + i], dq.data_ptr<double>() + (rows + i) * d,
                               c.query_band ? qbg.data_ptr<double>() + (rows + i) * width : nullptr);
      }
      for (int64_t j = 0; j < T; ++j) {  // the key-side backward threads
        am::backward_key_row(view, j, dout_c.data_ptr<double>() + rows * d, lse_row, delta.data_ptr<double>() + rows,
                             dk.data_ptr<double>() + (rows + j) * d, dv.data_ptr<double>() + (rows + j) * d,
                             c.key_band ? kbg.data_ptr<double>() + (rows + j) * width : nullptr);
      }
    }
  expect_close(out, fused.out.contiguous(), name + " output");
  expect_close(lse, fused.logsumexp, name + " log-sum-exp");
  expect_close(dq, grads.q.contiguous(), name + " dq");
  expect_close(dk, grads.k.contiguous(), name + " dk");
  expect_close(dv, grads.v.contiguous(), name + " dv");
  if (c.query_band) expect_close(qbg, grads.query_band, name + " query band gradient");
  if (c.key_band) expect_close(kbg, grads.key_band, name + " key band gradient");
}

TEST(AttentionMath, RowsAgreeWithTheFusedCpuKernel) {
  torch::manual_seed(61);
  for (int64_t length : {1, 5, 37})
    for (int64_t radius : {0, 2, 50})
      for (bool masked : {false, true})
        for (double dropout : {0.0, 0.3}) {
          check_case({2, 2, length, 8, radius, true, true, masked, dropout});
        }
  check_case({3, 1, 40, 4, 3, true, false, true, 0.0});   // the query band alone
  check_case({1, 2, 300, 16, 8, false, true, false, 0.1});  // the key band alone, past one CPU tile
  check_case({2, 2, 9, 8, 1, false, false, true, 0.2});     // no band: plain attention with a mask
}

}  // namespace
}  // namespace cabert
