// The encoder-decoders of every preset family: step-by-step decoding equals the teacher-forced forward (and
// keeps equal after beams are reordered), the decoder never sees later target tokens, source padding is
// masked, and the paper-size presets have the parameter counts of fairseq's architectures.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <string>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/generate/seq2seq_generator.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/summary.h"

namespace cabert::models {
namespace {

// "<preset>" or "<preset>+prenorm" (seq2seq.normalize_before=true).
Seq2SeqModel tiny_model(const std::string& param) {
  torch::manual_seed(11);
  const auto plus = param.find('+');
  std::vector<std::string> sets = {"vocab_size=40"};
  if (plus != std::string::npos) sets.push_back("seq2seq.normalize_before=true");
  Seq2SeqModel model(config::load_model_config(param.substr(0, plus), sets));
  model->to(torch::kDouble);
  model->eval();
  return model;
}

class Seq2SeqFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(Seq2SeqFamilies, StepByStepEqualsTheFullForwardAndFollowsReordering) {
  Seq2SeqModel model = tiny_model(GetParam());
  torch::NoGradGuard no_grad;
  const int64_t N = 3, S = 6, T = 7;
  torch::Tensor source = torch::randint(5, 40, {N, S}, torch::kLong);
  source.index_put_({1, torch::indexing::Slice(4)}, 0);  // a padded source row
  torch::Tensor source_mask = source.ne(0);
  torch::Tensor target_in = torch::randint(5, 40, {N, T}, torch::kLong);
  target_in.index_put_({torch::indexing::Slice(), 0}, 2);
  torch::Tensor target_mask = torch::ones({N, T}, torch::kBool);
  torch::Tensor full = model->forward(source, source_mask, target_in, target_mask);  // [N, T, V]

  torch::Tensor memory = model->encode(source, source_mask);
  DecoderState state = model->start_decoding(memory, source_mask);
  torch::Tensor order = torch::arange(N);  // which original row each state row is
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor step = model->decode_step(target_in.index_select(0, order).select(1, t), t, state);
    torch::Tensor expected = full.index_select(0, order).select(1, t);
    ASSERT_TRUE(torch::allclose(step, expected, 1e-9, 1e-10)) << GetParam() << " step " << t;
    if (t == 2) {  // beams fork and die: rows 2, 0, 0
      torch::Tensor rows = torch::tensor({2, 0, 0}, torch::kLong);
      state.reorder(rows);
      order = order.index_select(0, rows);
    }
  }
}

TEST_P(Seq2SeqFamilies, LaterTargetTokensLeaveEarlierLogitsBitIdentical) {
  Seq2SeqModel model = tiny_model(GetParam());
  torch::NoGradGuard no_grad;
  torch::Tensor source = torch::randint(5, 40, {2, 5}, torch::kLong);
  torch::Tensor target = torch::randint(5, 40, {2, 8}, torch::kLong);
  torch::Tensor mask = torch::ones({2, 8}, torch::kBool);
  torch::Tensor before = model->forward(source, source.ne(0), target, mask);
  for (int64_t t : {3, 7}) {
    torch::Tensor changed = target.clone();
    changed.index_put_({torch::indexing::Slice(), t}, (target.select(1, t) - 5 + 1) % 35 + 5);
    torch::Tensor after = model->forward(source, source.ne(0), changed, mask);
    EXPECT_TRUE(torch::equal(before.narrow(1, 0, t), after.narrow(1, 0, t))) << GetParam() << " t " << t;
    EXPECT_FALSE(torch::equal(before.select(1, t), after.select(1, t))) << GetParam() << " t " << t;
  }
}

TEST_P(Seq2SeqFamilies, SourcePaddingIsMaskedEverywhere) {
  Seq2SeqModel model = tiny_model(GetParam());
  torch::NoGradGuard no_grad;
  torch::Tensor source = torch::randint(5, 40, {1, 5}, torch::kLong);
  torch::Tensor padded = torch::cat({source, torch::zeros({1, 4}, torch::kLong)}, 1);
  torch::Tensor target = torch::randint(5, 40, {1, 6}, torch::kLong);
  torch::Tensor mask = torch::ones({1, 6}, torch::kBool);
  torch::Tensor plain = model->forward(source, source.ne(0), target, mask);
  torch::Tensor with_padding = model->forward(padded, padded.ne(0), target, mask);
  EXPECT_TRUE(torch::allclose(plain, with_padding, 1e-10, 1e-12)) << GetParam();
}

TEST_P(Seq2SeqFamilies, GreedyGenerationEqualsArgmaxOfTheFullForward) {
  Seq2SeqModel model = tiny_model(GetParam());
  torch::Tensor source = torch::randint(5, 40, {3, 5}, torch::kLong);
  source.index_put_({2, torch::indexing::Slice(3)}, 0);
  generate::SearchOptions options;
  options.beam_size = 1;
  options.max_length = 6;
  std::vector<generate::Hypothesis> hypotheses = generate::generate_batch(model, source, source.ne(0), options);
  torch::NoGradGuard no_grad;
  for (int64_t b = 0; b < 3; ++b) {
    // Recompute every prefix with the full forward: the next token is the argmax over non-PAD tokens.
    std::vector<int64_t> prefix = {2};
    std::vector<int64_t> expected;
    for (int64_t t = 0; t <= options.max_length; ++t) {
      torch::Tensor target = torch::tensor(prefix, torch::kLong).unsqueeze(0);
      torch::Tensor logits = model->forward(source.narrow(0, b, 1), source.narrow(0, b, 1).ne(0), target,
                                            torch::ones_like(target, torch::kBool));
      torch::Tensor last = logits[0][t].clone();
      last[0] = -std::numeric_limits<double>::infinity();
      if (t == options.max_length) break;
      int64_t next = last.argmax().item<int64_t>();
      expected.push_back(next);
      if (next == 3) break;
      prefix.push_back(next);
    }
    if (expected.empty() || expected.back() != 3) expected.push_back(3);  // EOS forced after max_length
    EXPECT_EQ(hypotheses[b].tokens, expected) << GetParam() << " example " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, Seq2SeqFamilies,
                         ::testing::Values("wu-lightconv-tiny", "wu-dynamicconv-tiny", "transformer-tiny",
                                           "tay-lightconv-tiny", "tay-dynamicconv-tiny", "tay-dilatedconv-tiny",
                                           "wu-lightconv-tiny+prenorm", "wu-dynamicconv-tiny+prenorm",
                                           "transformer-tiny+prenorm", "tay-dynamicconv-tiny+prenorm",
                                           "tay-dilatedconv-tiny+prenorm", "t5-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' || c == '+' ? '_' : c;
                           return name;
                         });

// fairseq's lightconv_iwslt_de_en with a joint 10,000-token vocabulary, counted by hand: per encoder layer
// d x d + d (input, no GLU) + H k (kernel) + d x d + d (output) + 2 d (LN) + 2 d I + I + d (FFN) + 2 d (LN);
// per decoder layer the same plus cross-attention 4 (d x d + d) + 2 d; one shared, tied token table V x d.
TEST(Seq2SeqPresets, IwsltLightConvHasTheHandCountedParameters) {
  const int64_t d = 512, I = 1024, H = 4, V = 10000;
  auto block = [&](int64_t k) { return (d * d + d) + H * k + (d * d + d) + 2 * d + (2 * d * I + I + d) + 2 * d; };
  int64_t expected = V * d;
  for (int64_t k : {3, 7, 15, 31, 31, 31, 31}) expected += block(k);
  for (int64_t k : {3, 7, 15, 31, 31, 31}) expected += block(k) + 4 * (d * d + d) + 2 * d;
  Seq2SeqModel model(config::load_model_config("wu-lightconv-iwslt", {"vocab_size=10000"}));
  EXPECT_EQ(count_parameters(*model), expected);
}

// Tay et al.'s "convolutions + one attention layer": one more encoder layer, plain softmax attention, padding
// still masked.
TEST(Seq2SeqPresets, TopAttentionLayerAddsOneMaskedAttentionLayer) {
  torch::manual_seed(3);
  Seq2SeqModel plain(config::load_model_config("tay-dilatedconv-tiny", {"vocab_size=40"}));
  Seq2SeqModel top(
      config::load_model_config("tay-dilatedconv-tiny", {"vocab_size=40", "seq2seq.encoder_top_attention=true"}));
  ASSERT_TRUE(top->encoder_top_attention);
  EXPECT_EQ(count_parameters(*top) - count_parameters(*plain), count_parameters(*top->encoder_top_attention));
  const int64_t d = 32, I = 64;  // Q, K, V, output projections + 2 LayerNorms + FFN
  EXPECT_EQ(count_parameters(*top->encoder_top_attention), 4 * (d * d + d) + 4 * d + (2 * d * I + I + d));
  top->to(torch::kDouble);
  top->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor source = torch::randint(5, 40, {1, 5}, torch::kLong);
  torch::Tensor padded = torch::cat({source, torch::zeros({1, 3}, torch::kLong)}, 1);
  torch::Tensor memory = top->encode(source, source.ne(0));
  torch::Tensor memory_padded = top->encode(padded, padded.ne(0)).narrow(1, 0, 5);
  EXPECT_TRUE(torch::allclose(memory, memory_padded, 1e-10, 1e-12));
}

TEST(Seq2SeqPresets, EncoderDecoderPresetsAreListedAndBuild) {
  for (const std::string& name : config::preset_names()) {
    pb::ModelConfig c = config::preset_config(name);
    if (!c.has_seq2seq() || name.find("tiny") == std::string::npos) continue;
    EXPECT_NO_THROW(Seq2SeqModel{c}) << name;
  }
  EXPECT_TRUE(config::is_preset("wu-dynamicconv-wmt-big"));
  EXPECT_TRUE(config::is_preset("tay-dilatedconv-base"));
}

}  // namespace
}  // namespace cabert::models
