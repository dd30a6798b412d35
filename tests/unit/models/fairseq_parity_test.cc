// Parity with fairseq 0.12.2's own modules (Wu et al.'s code): tests/python/fairseq_reference.py runs fairseq's
// LightweightConv1dTBC, DynamicConv1dTBC and MultiheadAttention on fixed weights and inputs (float64, eval) and
// writes them to $CABERT_FAIRSEQ_REFERENCE; here cabert's ConvBlock, BertSelfAttention, CausalSelfAttention and
// CrossAttention take the same weights and must give the same outputs: to 1e-10 where fairseq computes in the
// inputs' float64 (DynamicConv1dTBC), to 1e-6 where fairseq's own utils.softmax computes the softmax in float32
// whatever the input (`F.softmax(x, dim=dim, dtype=torch.float32)`: LightweightConv1dTBC's kernels and
// MultiheadAttention's weights; 1e-6 is float32's rounding of those probabilities, well inside 1e-5). Centred convolution with source
// padding, causal convolution full and step by step (fairseq's incremental input buffer), softmax-normalised
// kernels with DropConnect off, self-attention with a key padding mask, causal self-attention full and
// incremental, encoder-decoder attention full and with the source cached (static_kv). Run by
// tests/cli/fairseq_parity_test.sh; skipped when the variable is unset (no fairseq sdist).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/composite_attention.h"
#include "lib/models/decoder_attention.h"
#include "lib/models/light_dynamic_conv_block.h"

namespace cabert::models {
namespace {

namespace F = torch::nn::functional;

constexpr double kFloat64 = 1e-10;         // fairseq computes in the inputs' dtype
constexpr double kFloat32Softmax = 1e-6;   // through fairseq's utils.softmax (float32 by design)

class FairseqParity : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("CABERT_FAIRSEQ_REFERENCE");
    if (path == nullptr || *path == '\0') GTEST_SKIP() << "CABERT_FAIRSEQ_REFERENCE unset (no fairseq sdist)";
    file = std::make_unique<io::SafetensorsFile>(path);
    input = get("input");
    mask = get("pad").eq(0);
  }
  torch::Tensor get(const std::string& name) { return io::read_tensor(*file, name); }

  static void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                           double tolerance) {
    ASSERT_EQ(a.sizes(), b.sizes()) << what;
    EXPECT_TRUE(torch::allclose(a, b, tolerance, tolerance)) << what << ": max difference "
                                                      << (a - b).abs().max().item<double>();
  }
  // Rows of sequence 1 beyond its length are padding: compared only where real.
  void expect_close_where_real(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                               double tolerance) {
    torch::Tensor real = mask.unsqueeze(-1).expand_as(a);
    expect_close(a.masked_select(real), b.masked_select(real), what, tolerance);
  }

  ConvBlock conv_block(const std::string& family, bool causal) {
    pb::ModelConfig config = config::load_model_config(
        family + "-tiny", {"hidden_size=8", "embedding_size=8", "num_heads=2", "intermediate_size=16",
                           "conv_block.kernel_sizes=5", "conv_block.conv_heads=2", "conv_block.glu=false",
                           "conv_block.weight_dropout=0.1", std::string("conv_block.causal=") + (causal ? "true" : "false")});
    ConvBlock block(config, 0);
    block->to(torch::kDouble);
    block->eval();
    torch::NoGradGuard no_grad;
    block->input->weight.copy_(torch::eye(8, torch::kDouble));  // the conv alone (fairseq's module has no input Linear)
    block->input->bias.zero_();
    return block;
  }

  void check_conv(const std::string& family, const std::string& prefix, double tolerance) {
    torch::NoGradGuard no_grad;
    for (bool causal : {false, true}) {
      const std::string tag = prefix + (causal ? ".causal" : ".centred");
      ConvBlock block = conv_block(family, causal);
      if (family == "dynamicconv") {
        block->kernel_projection->weight.copy_(get(tag + ".kernel_projection"));
      } else {
        block->weight.copy_(get(tag + ".weight"));
      }
      if (!causal) {
        expect_close_where_real(block->forward(input, mask), get(tag + ".output"), tag, tolerance);
        continue;
      }
      expect_close(block->forward(input, {}), get(tag + ".output"), tag, tolerance);
      MixerState state;
      std::vector<torch::Tensor> steps;
      for (int64_t t = 0; t < input.size(1); ++t) steps.push_back(block->forward_step(input.narrow(1, t, 1), state));
      expect_close(torch::cat(steps, 1), get(tag + ".steps"), tag + " step by step", tolerance);
    }
  }

  // q/k/v of fairseq's MultiheadAttention into cabert's three Linears; returns out_proj as (weight, bias).
  std::pair<torch::Tensor, torch::Tensor> load_attention(const std::string& name, torch::nn::Linear& q,
                                                         torch::nn::Linear& k, torch::nn::Linear& v) {
    torch::NoGradGuard no_grad;
    q->weight.copy_(get(name + ".q_proj.weight")), q->bias.copy_(get(name + ".q_proj.bias"));
    k->weight.copy_(get(name + ".k_proj.weight")), k->bias.copy_(get(name + ".k_proj.bias"));
    v->weight.copy_(get(name + ".v_proj.weight")), v->bias.copy_(get(name + ".v_proj.bias"));
    return {get(name + ".out_proj.weight"), get(name + ".out_proj.bias")};
  }

  std::unique_ptr<io::SafetensorsFile> file;
  torch::Tensor input, mask;
};

TEST_F(FairseqParity, LightweightConvolutionEqualsLightweightConv1dTBC) { check_conv("lightconv", "lightweight", kFloat32Softmax); }

TEST_F(FairseqParity, DynamicConvolutionEqualsDynamicConv1dTBC) { check_conv("dynamicconv", "dynamic", kFloat64); }

TEST_F(FairseqParity, SelfAttentionWithKeyPaddingEqualsMultiheadAttention) {
  pb::ModelConfig config =
      config::load_model_config("transformer-tiny", {"hidden_size=8", "embedding_size=8", "num_heads=2"});
  BertSelfAttention attention(config);
  attention->to(torch::kDouble);
  attention->eval();
  auto [out_w, out_b] = load_attention("self_attention", attention->query, attention->key, attention->value);
  torch::NoGradGuard no_grad;
  expect_close_where_real(F::linear(attention->forward(input, mask), out_w, out_b), get("self_attention.output"),
                          "self-attention", kFloat32Softmax);
}

TEST_F(FairseqParity, CausalSelfAttentionEqualsMultiheadAttentionFullAndIncremental) {
  CausalSelfAttention attention(8, 2, 0.1);
  attention->to(torch::kDouble);
  attention->eval();
  auto [out_w, out_b] = load_attention("causal_attention", attention->query, attention->key, attention->value);
  torch::NoGradGuard no_grad;
  expect_close(F::linear(attention->forward(input, {}), out_w, out_b), get("causal_attention.output"), "causal",
               kFloat32Softmax);
  MixerState state;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < input.size(1); ++t) steps.push_back(attention->forward_step(input.narrow(1, t, 1), state));
  expect_close(F::linear(torch::cat(steps, 1), out_w, out_b), get("causal_attention.steps"), "causal step by step",
               kFloat32Softmax);
}

TEST_F(FairseqParity, CrossAttentionEqualsEncoderDecoderMultiheadAttention) {
  CrossAttention attention(8, 2, 0.1);
  attention->to(torch::kDouble);
  attention->eval();
  auto [out_w, out_b] = load_attention("cross_attention", attention->query, attention->key, attention->value);
  torch::NoGradGuard no_grad;
  torch::Tensor memory = get("memory"), memory_mask = get("memory_pad").eq(0);
  expect_close(F::linear(attention->forward(input, memory, memory_mask), out_w, out_b), get("cross_attention.output"),
               "cross-attention", kFloat32Softmax);
  MixerState state;
  attention->cache_memory(memory, state);
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < input.size(1); ++t) {
    steps.push_back(attention->forward_step(input.narrow(1, t, 1), memory_mask, state));
  }
  expect_close(F::linear(torch::cat(steps, 1), out_w, out_b), get("cross_attention.steps"), "cross step by step",
               kFloat32Softmax);
}

}  // namespace
}  // namespace cabert::models
