// Composite attention (lib/ops/attention_ops.h): the fused tiled CPU kernel against the plain-ATen reference,
// forward and every gradient (q, k, v, W^C, beta, W^K'), in double, over every combination of relative terms,
// radii inside and beyond T, padding masks, dropout (the same Philox mask both ways), and lengths that are not
// a multiple of either tile (256 queries, 512 keys); finite differences on tiny shapes; float agreement; the
// Philox generator against its published known-answer vectors; argument errors.
#include <gtest/gtest.h>

#include "kernels/attention_kernels.h"
#include "kernels/dropout_kernels.h"
#include "kernels/cpu/philox_lanes.h"
#include "kernels/philox.h"
#include "kernels/relative_bands.h"
#include "lib/core/errors.h"
#include "lib/ops/attention_ops.h"
#include "lib/ops/memory_meter.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert {
namespace {

using ops::KernelPath;
using testing::expect_same;
using testing::f64;
using testing::Op;
using testing::OpRun;
using testing::run_on_path;

// Random123's known-answer vectors for philox4x32-10 (kat_vectors): counter, key -> output.
TEST(Philox, MatchesPublishedKnownAnswers) {
  auto words = kernels::philox::philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(words.w[0], 0x6627e8d5u);
  EXPECT_EQ(words.w[1], 0xe169c58du);
  EXPECT_EQ(words.w[2], 0xbc57ac4cu);
  EXPECT_EQ(words.w[3], 0x9b00dbd8u);
  words = kernels::philox::philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(words.w[0], 0x408f276du);
  EXPECT_EQ(words.w[1], 0x41c83b0eu);
  EXPECT_EQ(words.w[2], 0xa20bc7c6u);
  EXPECT_EQ(words.w[3], 0x6d5451fdu);
  words = kernels::philox::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(words.w[0], 0xd16cfe09u);
  EXPECT_EQ(words.w[1], 0x94fdccebu);
  EXPECT_EQ(words.w[2], 0x5001e420u);
  EXPECT_EQ(words.w[3], 0x24126ea1u);
}

// The CPU kernels' lane forms (the one they run, AVX-512 where built with it, and the portable one) give the
// one-block form's words: runs of every length around the lane counts (16, and 32 for the AVX-512 form's two
// groups), a start that is not a multiple of them, a counter whose low word wraps into the high one, full-width
// seeds and offsets.
TEST(Philox, LaneFormGivesTheSameWordsAsTheBlockForm) {
  const uint64_t seeds[] = {0, 0x0123456789abcdefull, ~0ull};
  const uint64_t offsets[] = {0, 7, 0xfedcba9876543210ull};
  const uint64_t firsts[] = {0, 3, 0xfffffff5ull, 0x123456789ull};
  const int64_t counts[] = {1, 15, 16, 17, 31, 32, 33, 65, 128, 129};
  std::vector<uint32_t> words(4 * 129);
  for (auto* form : {&kernels::cpu::philox_words, &kernels::cpu::philox_words_portable}) {
    for (uint64_t seed : seeds) {
      for (uint64_t offset : offsets) {
        for (uint64_t first : firsts) {
          for (int64_t count : counts) {
            std::fill(words.begin(), words.end(), 0u);
            form(seed, offset, first, count, words.data());
            for (int64_t b = 0; b < count; ++b) {
              const kernels::philox::Words expected = kernels::philox::block(seed, offset, first + b);
              for (int w = 0; w < 4; ++w) {
                ASSERT_EQ(words[4 * b + w], expected.w[w])
                    << "seed " << seed << " offset " << offset << " block " << first + b << " word " << w;
              }
            }
            for (size_t rest = 4 * count; rest < words.size(); ++rest)
              ASSERT_EQ(words[rest], 0u) << "wrote past the run";
          }
        }
      }
    }
  }
}

TEST(Philox, DropoutMaskKeepsOneMinusPAndDependsOnTheSeed) {
  kernels::DropoutDraw draw;
  draw.p = 0.3;
  draw.seed = 1234;
  at::Tensor keep = kernels::dropout_keep({2, 3, 100, 100}, draw);
  const double kept = keep.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.7, 0.01);  // 60,000 draws: standard error 0.002
  EXPECT_TRUE(torch::equal(keep, kernels::dropout_keep({2, 3, 100, 100}, draw)));
  draw.seed = 1235;
  EXPECT_FALSE(torch::equal(keep, kernels::dropout_keep({2, 3, 100, 100}, draw)));
}

// Which relative terms a case has: W^C (q), beta (b), W^K' (k).
struct Terms {
  bool query, beta, key;
  std::string name() const {
    return std::string(query ? "q" : "") + (beta ? "b" : "") + (key ? "k" : "") + (query || beta || key ? "" : "none");
  }
};

struct CompositeCase {
  int64_t batch, heads, length, head_size, radius;
  Terms terms;
  bool masked;
  double dropout;
  std::string name() const {
    return "B=" + std::to_string(batch) + " T=" + std::to_string(length) + " d=" + std::to_string(head_size) +
           " n=" + std::to_string(radius) + " " + terms.name() + (masked ? " masked" : "") +
           (dropout > 0 ? " dropout" : "");
  }
};

// A real prefix of a different length per batch element (about two thirds of T, the last fully real) and a hole
// in the first (testing::ragged_mask, of the conv tests, pads only the last b + 1 positions of row b).
torch::Tensor two_thirds_ragged_mask(int64_t batch, int64_t length) {
  auto mask = torch::ones({batch, length}, torch::kBool);
  for (int64_t b = 0; b + 1 < batch; ++b) {
    mask.index_put_({b, torch::indexing::Slice(std::max<int64_t>(1, length * 2 / 3 - b), torch::indexing::None)},
                    false);
  }
  if (length >= 4) mask.index_put_({0, 1}, false);
  return mask;
}

// Inputs: q, k, v, then the defined relative weights in the order W^C, beta, W^K'.
struct AttentionProblem {
  CompositeCase c;
  torch::Tensor mask;
  std::vector<torch::Tensor> inputs;
  Op op;
};

AttentionProblem make_problem(const CompositeCase& c, torch::Dtype dtype = torch::kDouble) {
  AttentionProblem problem{c, c.masked ? two_thirds_ragged_mask(c.batch, c.length) : torch::Tensor(), {}, {}};
  const auto options = torch::TensorOptions().dtype(dtype);
  const int64_t width = 2 * c.radius + 1;
  for (int i = 0; i < 3; ++i)
    problem.inputs.push_back(torch::randn({c.batch, c.heads, c.length, c.head_size}, options));
  if (c.terms.query) problem.inputs.push_back(torch::randn({width, c.head_size}, options));
  if (c.terms.beta) problem.inputs.push_back(torch::randn({c.heads, width}, options));
  if (c.terms.key) problem.inputs.push_back(torch::randn({width, c.head_size}, options));
  const torch::Tensor mask = problem.mask;
  problem.op = [c, mask](const std::vector<torch::Tensor>& in) {
    ops::RelativePositionTerms relative;
    relative.radius = c.radius;
    size_t next = 3;
    if (c.terms.query) relative.query_weight = in[next++];
    if (c.terms.beta) relative.beta = in[next++];
    if (c.terms.key) relative.key_weight = in[next++];
    torch::manual_seed(99);  // the dropout draw: the same seed on both paths
    return ops::composite_attention(in[0], in[1], in[2], relative, mask, 0.37, c.dropout);
  };
  return problem;
}

void expect_fused_matches_reference(const CompositeCase& c, double tolerance = 1e-10) {
  AttentionProblem problem = make_problem(c);
  auto probe = torch::randn({c.batch, c.heads, c.length, c.head_size}, f64());
  expect_same(run_on_path(KernelPath::kFused, problem.op, problem.inputs, probe),
              run_on_path(KernelPath::kReference, problem.op, problem.inputs, probe), c.name(), tolerance);
}

// The models pass heads as [B, N, T, d] views of the projections' [B, T, N, d] output; the fused backward then
// adds the bands' gradients to q's and k's in place. The same values as the reference, with and without dropout.
TEST(FusedAttention, HeadsLastInputsMatchReference) {
  torch::manual_seed(23);
  for (double dropout : {0.0, 0.3}) {
    const CompositeCase c{2, 3, 37, 8, 4, {true, true, true}, true, dropout};
    AttentionProblem problem = make_problem(c);
    for (int i = 0; i < 3; ++i) problem.inputs[i] = problem.inputs[i].transpose(1, 2).contiguous();  // [B, T, N, d]
    const Op heads_view = [op = problem.op](const std::vector<torch::Tensor>& in) {
      std::vector<torch::Tensor> viewed = in;
      for (int i = 0; i < 3; ++i) viewed[i] = in[i].transpose(1, 2);
      return op(viewed);
    };
    auto probe = torch::randn({c.batch, c.heads, c.length, c.head_size}, f64());
    expect_same(run_on_path(KernelPath::kFused, heads_view, problem.inputs, probe),
                run_on_path(KernelPath::kReference, heads_view, problem.inputs, probe), c.name() + " heads-last",
                1e-10);
  }
}

const std::vector<Terms> kRelativeTerms = {
    {true, false, false}, {false, true, false}, {true, true, false}, {false, false, true}, {true, true, true}};

TEST(FusedAttention, EveryRelativeVariantMatchesReference) {
  torch::manual_seed(21);
  for (const Terms& terms : kRelativeTerms)
    for (int64_t length : {1, 2, 7, 70})
      for (int64_t radius : {0, 3, 80})
        for (bool masked : {false, true}) expect_fused_matches_reference({2, 2, length, 5, radius, terms, masked, 0});
}

// Tiles (kernels/cpu/attention_cpu.cc): 256 queries x 512 keys; 512 is exactly one key tile and two query
// tiles, 600 and 700 leave partial tiles of both, and at 700 the mask of batch element 0 (real up to 466)
// empties the whole second key tile.
TEST(FusedAttention, LengthsAcrossTilesMatchReference) {
  torch::manual_seed(22);
  for (int64_t length : {64, 300, 512, 600, 700})
    for (bool masked : {false, true})
      expect_fused_matches_reference({2, 2, length, 8, 4, {true, true, true}, masked, 0});
}

TEST(FusedAttention, DropoutUsesTheSameMaskBothWays) {
  torch::manual_seed(23);
  for (int64_t length : {3, 70, 600})  // 600: a second, partial key tile draws from the middle of each row's stream
    for (bool masked : {false, true})
      expect_fused_matches_reference({2, 3, length, 4, 5, {true, true, true}, masked, 0.3});
}

// Without relative terms the fused path is PyTorch's SDPA, without the Philox mask: checked without dropout.
TEST(FusedAttention, PlainAttentionThroughSdpaMatchesReference) {
  torch::manual_seed(24);
  for (int64_t length : {1, 9, 130})
    for (bool masked : {false, true})
      expect_fused_matches_reference({2, 2, length, 8, 0, {false, false, false}, masked, 0});
}

// PyTorch's CPU flash kernel takes no dropout (SDPA would run its T x T math path with torch's own mask), so
// plain attention trained with dropout on the CPU runs the tiled kernel without bands: the reference's Philox
// mask and values (through SDPA the masks would differ), and nothing T x T.
TEST(FusedAttention, PlainAttentionWithDropoutTakesTheTiledKernel) {
  torch::manual_seed(28);
  for (int64_t length : {1, 9, 130})
    for (bool masked : {false, true})
      expect_fused_matches_reference({2, 2, length, 8, 0, {false, false, false}, masked, 0.3});
  const int64_t T = 4096;  // one head's score matrix alone: 64 MiB in float
  auto q = torch::randn({1, 1, T, 16}).requires_grad_(), k = torch::randn({1, 1, T, 16}).requires_grad_(),
       v = torch::randn({1, 1, T, 16}).requires_grad_();
  ops::ScopedKernelPath fused(KernelPath::kFused);
  ops::install_cpu_memory_meter();
  ops::PeakMemoryScope meter;
  ops::composite_attention(q, k, v, ops::RelativePositionTerms{}, {}, 0.25, 0.1).sum().backward();
  EXPECT_LT(meter.peak_extra_bytes(), int64_t{8} << 20) << "peak " << meter.peak_extra_bytes();
}

TEST(FusedAttention, GradientsMatchFiniteDifferences) {
  torch::manual_seed(25);
  for (double dropout : {0.0, 0.4}) {
    AttentionProblem problem = make_problem({2, 2, 5, 3, 1, {true, true, true}, true, dropout});
    auto probe = torch::randn({2, 2, 5, 3}, f64());
    ops::ScopedKernelPath fused(KernelPath::kFused);
    EXPECT_LT(testing::max_finite_difference_error(problem.op, problem.inputs, probe), 1e-7) << "dropout " << dropout;
  }
}

TEST(FusedAttention, FloatAgreesWithDoubleReference) {
  torch::manual_seed(26);
  CompositeCase c{2, 4, 300, 32, 8, {true, true, true}, true, 0.1};
  AttentionProblem problem = make_problem(c);
  std::vector<torch::Tensor> as_float;
  for (const auto& t : problem.inputs) as_float.push_back(t.to(torch::kFloat));
  auto probe = torch::randn({c.batch, c.heads, c.length, c.head_size}, f64());
  OpRun fused = run_on_path(KernelPath::kFused, problem.op, as_float, probe.to(torch::kFloat));
  OpRun reference = run_on_path(KernelPath::kReference, problem.op, problem.inputs, probe);
  EXPECT_TRUE(torch::allclose(fused.out.to(torch::kDouble), reference.out, 1e-4, 1e-4))
      << (fused.out.to(torch::kDouble) - reference.out).abs().max().item<double>();
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    const double scale = reference.grads[i].abs().max().item<double>();
    EXPECT_LT((fused.grads[i].to(torch::kDouble) - reference.grads[i]).abs().max().item<double>(), 1e-4 * scale)
        << "gradient of input " << i;
  }
}

// The kernel's outputs and gradients (each defined one) with one thread and with two: bitwise the same.
// Returns the one-thread run's: out, log-sum-exp, dq, dk, dv, the bands', the weights'.
std::vector<torch::Tensor> expect_thread_count_independent(const kernels::AttentionInputs& in) {
  const torch::Tensor grad_out = torch::randn(in.q.sizes());
  const int previous = at::get_num_threads();
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    kernels::AttentionOutputs forward = kernels::relative_attention_forward(in);
    kernels::AttentionGrads grads = kernels::relative_attention_backward(grad_out, in, forward);
    return std::vector<torch::Tensor>{forward.out, forward.logsumexp, grads.q,        grads.k,
                                      grads.v,     grads.query_band,  grads.key_band, grads.query_weight,
                                      grads.beta,  grads.key_weight};
  };
  const std::vector<torch::Tensor> one = run(1), two = run(2);
  at::set_num_threads(previous);
  const char* names[] = {"out", "logsumexp", "dq", "dk", "dv", "d query band", "d key band", "dW^C", "d beta", "dW^K'"};
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].defined(), two[i].defined()) << names[i];
    if (one[i].defined() && two[i].defined()) {
      EXPECT_TRUE(torch::equal(one[i], two[i])) << names[i];
    }
  }
  return one;
}

// The kernel splits its work over threads without splitting any sum: one or two threads give bitwise the same
// results, forward and backward, with the relative terms as bands and as weights (whose products run inside the
// kernel, each on its thread, and whose gradients sum per-(batch, head) slots in a fixed order).
TEST(FusedAttention, KernelResultsDoNotDependOnTheThreadCount) {
  torch::manual_seed(27);
  const int64_t batch = 2, heads = 3, length = 300, head_size = 16, radius = 6, width = 2 * radius + 1;
  kernels::AttentionInputs in = testing::banded_inputs(batch, heads, length, head_size, radius, 0.25);
  in.key_mask = two_thirds_ragged_mask(batch, length);
  in.dropout = {0.2, 1234, 56};
  const std::vector<torch::Tensor> banded = expect_thread_count_independent(in);
  EXPECT_TRUE(banded[5].defined() && banded[6].defined());
  in.query_band = at::Tensor();
  in.key_band = at::Tensor();
  in.weights = {torch::randn({width, head_size}), torch::randn({heads, width}), torch::randn({width, head_size})};
  const std::vector<torch::Tensor> weighted = expect_thread_count_independent(in);
  EXPECT_TRUE(weighted[7].defined() && weighted[8].defined() && weighted[9].defined());
}

// A batch element whose keys are all padding attends uniformly (what the reference's bias gives).
TEST(FusedAttention, NoRealKeyAttendsUniformly) {
  auto q = torch::randn({2, 1, 6, 4}, f64()), k = torch::randn({2, 1, 6, 4}, f64()),
       v = torch::randn({2, 1, 6, 4}, f64());
  auto mask = torch::ones({2, 6}, torch::kBool);
  mask.index_put_({0}, false);
  ops::RelativePositionTerms relative{torch::randn({3, 4}, f64()), torch::randn({1, 3}, f64()), {}, 1};
  ops::ScopedKernelPath fused(KernelPath::kFused);
  auto out = ops::composite_attention(q, k, v, relative, mask, 0.5, 0);
  EXPECT_TRUE(torch::allclose(out[0][0], v[0][0].mean(0).expand({6, 4}), 1e-12, 1e-12));
  ops::ScopedKernelPath reference(KernelPath::kReference);
  EXPECT_TRUE(torch::allclose(out, ops::composite_attention(q, k, v, relative, mask, 0.5, 0), 1e-10, 1e-10));
}

// Linear memory: at T = 4096 the score matrix of one head alone would be 64 MiB in float.
TEST(FusedAttention, NeverAllocatesTheScoreMatrix) {
  const int64_t T = 4096;
  auto q = torch::randn({1, 1, T, 16}).requires_grad_(), k = torch::randn({1, 1, T, 16}).requires_grad_(),
       v = torch::randn({1, 1, T, 16}).requires_grad_();
  ops::RelativePositionTerms relative{torch::randn({9, 16}).requires_grad_(), torch::randn({1, 9}).requires_grad_(),
                                      torch::randn({9, 16}).requires_grad_(), 4};
  ops::ScopedKernelPath fused(KernelPath::kFused);
  ops::install_cpu_memory_meter();
  ops::PeakMemoryScope meter;
  auto out = ops::composite_attention(q, k, v, relative, {}, 0.25, 0.1);
  out.sum().backward();
  EXPECT_LT(meter.peak_extra_bytes(), int64_t{8} << 20) << "peak " << meter.peak_extra_bytes();
  EXPECT_TRUE(q.grad().defined() && relative.key_weight.grad().defined());
}

// The kernel's forward refuses `in` with exactly this UsageError message.
void expect_usage_error(const kernels::AttentionInputs& in, const std::string& message) {
  try {
    kernels::relative_attention_forward(in);
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const UsageError& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(FusedAttention, BadArgumentsAreUsageErrors) {
  kernels::AttentionInputs in;
  in.q = torch::randn({1, 2, 5, 4});
  in.k = in.q;
  in.v = torch::randn({1, 2, 6, 4});
  expect_usage_error(in, "relative_attention: expected v of shape [1, 2, 5, 4] (as q), got [1, 2, 6, 4]");
  in.v = in.q;
  in.radius = 2;
  in.query_band = torch::randn({1, 2, 5, 4});
  expect_usage_error(in, "relative_attention: expected query_band of shape [1, 2, 5, 5], got [1, 2, 5, 4]");
  in.query_band = torch::randn({1, 2, 5, 5});
  in.weights.beta = torch::randn({2, 5});
  expect_usage_error(in, "relative_attention: expected the relative terms as bands or as weights, got both");
  in.query_band = at::Tensor();
  in.weights.key = torch::randn({5, 3});
  expect_usage_error(in, "relative_attention: expected W^K' of shape [5, 4], got [5, 3]");
}

// From weights the CPU kernel computes the bands per query tile and per head, and maps their gradients to q, k
// and the weights inside its tiles: the same values as the bands computed whole (kernels/relative_bands.h) through
// the kernel, their gradients mapped by ATen products. Lengths across both tiles, padding, dropout, every variant.
TEST(FusedAttention, WeightsGiveWhatTheirBandsGive) {
  torch::manual_seed(29);
  for (const Terms& terms : kRelativeTerms)
    for (int64_t length : {5, 300, 600})
      for (double dropout : {0.0, 0.3}) {
        const int64_t B = 2, N = 3, d = 8, radius = 4, width = 2 * radius + 1;
        kernels::AttentionInputs weighted;
        weighted.q = torch::randn({B, length, N, d}, f64()).transpose(1, 2);
        weighted.k = torch::randn({B, length, N, d}, f64()).transpose(1, 2);
        weighted.v = torch::randn({B, length, N, d}, f64()).transpose(1, 2);
        if (terms.query) weighted.weights.query = torch::randn({width, d}, f64());
        if (terms.beta) weighted.weights.beta = torch::randn({N, width}, f64());
        if (terms.key) weighted.weights.key = torch::randn({width, d}, f64());
        weighted.key_mask = two_thirds_ragged_mask(B, length);
        weighted.radius = radius;
        weighted.scale = 0.37;
        weighted.dropout = {dropout, 0x5eed, 3};
        kernels::AttentionInputs banded = weighted;
        const kernels::Bands bands =
            kernels::relative_bands(weighted.q, weighted.k, weighted.weights, radius, weighted.scale);
        banded.weights = kernels::RelativeWeights{};
        banded.query_band = bands.query;
        banded.key_band = bands.key;
        const at::Tensor dout = torch::randn({B, N, length, d}, f64());
        const std::string where = "T=" + std::to_string(length) + " " + terms.name() + (dropout > 0 ? " dropout" : "");
        const testing::KernelRun got = testing::tiled_run(weighted, dout);
        testing::KernelRun want = testing::tiled_run(banded, dout);
        kernels::band_grads_to_weights(weighted, want.grads);
        testing::expect_same_run(got, want, where);
        testing::expect_close(got.grads.query_weight, want.grads.query_weight, where + " dW^C");
        testing::expect_close(got.grads.beta, want.grads.beta, where + " d beta");
        testing::expect_close(got.grads.key_weight, want.grads.key_weight, where + " dW^K'");
      }
}

// What the CUDA routes do with weights, checked here: the bands over q's and k's heads-last storage equal plain
// matmuls, and the weights' and rows' gradients mapped from the bands' equal autograd's through those matmuls.
TEST(FusedAttention, BandsFromWeightsAndTheirGradientsMatchAutograd) {
  torch::manual_seed(30);
  const int64_t B = 2, N = 3, T = 11, d = 4, radius = 2, width = 5;
  const double scale = 0.3;
  kernels::AttentionInputs in;
  in.q = torch::randn({B, T, N, d}, f64()).transpose(1, 2).requires_grad_();
  in.k = torch::randn({B, T, N, d}, f64()).transpose(1, 2).requires_grad_();
  in.weights = {torch::randn({width, d}, f64()).requires_grad_(), torch::randn({N, width}, f64()).requires_grad_(),
                torch::randn({width, d}, f64()).requires_grad_()};
  in.radius = radius;
  in.scale = scale;
  const kernels::Bands by_matmul =
      kernels::relative_bands(in.q, in.k, in.weights, radius, scale, kernels::band_by_matmul);
  const kernels::Bands over_storage = [&] {
    torch::NoGradGuard no_grad;
    return kernels::relative_bands(in.q, in.k, in.weights, radius, scale);
  }();
  testing::expect_close(over_storage.query, by_matmul.query, "query band");
  testing::expect_close(over_storage.key, by_matmul.key, "key band");
  const at::Tensor gq = torch::randn({B, N, T, width}, f64()), gk = torch::randn({B, N, T, width}, f64());
  const std::vector<at::Tensor> want =
      torch::autograd::grad({(by_matmul.query * gq).sum() + (by_matmul.key * gk).sum()},
                            {in.q, in.k, in.weights.query, in.weights.beta, in.weights.key});
  kernels::AttentionGrads grads;
  grads.q = kernels::heads_last(torch::zeros({B, N, T, d}, f64()));
  grads.k = torch::zeros({B, N, T, d}, f64());  // not heads-last: the out-of-place branch
  grads.query_band = gq;
  grads.key_band = gk;
  kernels::band_grads_to_weights(in, grads);
  testing::expect_close(grads.q, want[0], "dq");
  testing::expect_close(grads.k, want[1], "dk");
  testing::expect_close(grads.query_weight, want[2], "dW^C");
  testing::expect_close(grads.beta, want[3], "d beta");
  testing::expect_close(grads.key_weight, want[4], "dW^K'");
  EXPECT_FALSE(grads.query_band.defined() || grads.key_band.defined());
}

// CUDA's auto route hands ops the problems of at most 2^25 score entries (B N T^2) for the reference's T x T
// scores; the other routes never, and a scope restores the route before it.
TEST(CudaAttentionRoute, AutoTakesTheScoresUpToItsBound) {
  using kernels::CudaAttentionRoute;
  ASSERT_EQ(kernels::cuda_attention_route(), CudaAttentionRoute::kAuto) << "the default";
  EXPECT_TRUE(kernels::cuda_attention_takes_scores(8, 4, 1024));  // 2^25 exactly
  EXPECT_FALSE(kernels::cuda_attention_takes_scores(8, 4, 1025));
  EXPECT_TRUE(kernels::cuda_attention_takes_scores(1, 1, 5792));    // 5792^2 = 33,547,264
  EXPECT_FALSE(kernels::cuda_attention_takes_scores(1, 1, 5793));   // 33,558,849
  EXPECT_TRUE(kernels::cuda_attention_takes_scores(128, 12, 128));  // 25,165,824
  EXPECT_FALSE(kernels::cuda_attention_takes_scores(128, 12, 256));
  EXPECT_FALSE(kernels::cuda_attention_takes_scores(2, 2, int64_t(1) << 40)) << "no overflow";
  EXPECT_TRUE(kernels::cuda_attention_takes_scores(8, 4, 0));
  for (CudaAttentionRoute route :
       {CudaAttentionRoute::kRegions, CudaAttentionRoute::kBlocks, CudaAttentionRoute::kTiles}) {
    const kernels::ScopedCudaAttentionRoute scope(route);
    EXPECT_EQ(kernels::cuda_attention_route(), route);
    EXPECT_FALSE(kernels::cuda_attention_takes_scores(8, 4, 16));
  }
  EXPECT_EQ(kernels::cuda_attention_route(), CudaAttentionRoute::kAuto) << "restored";
  EXPECT_EQ(kernels::parse_cuda_attention_route("auto"), CudaAttentionRoute::kAuto);
  EXPECT_EQ(kernels::parse_cuda_attention_route("regions"), CudaAttentionRoute::kRegions);
  EXPECT_EQ(kernels::parse_cuda_attention_route("blocks"), CudaAttentionRoute::kBlocks);
  EXPECT_EQ(kernels::parse_cuda_attention_route("tiles"), CudaAttentionRoute::kTiles);
  EXPECT_THROW(kernels::parse_cuda_attention_route("Auto"), UsageError);
}

}  // namespace
}  // namespace cabert
