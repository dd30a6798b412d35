// translate_examples' DecodingCost counts the tokens the search generated (EOS included), the decoding speed
// `evaluate` records for Wu et al.'s "faster decoding". Reference: the same examples translated one at a time
// through generate::generate_batch, whose hypotheses' tokens are counted here.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/eval/translation.h"
#include "lib/generate/seq2seq_generator.h"
#include "lib/models/seq2seq_model.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::eval {
namespace {

TEST(TranslationCost, CountsEveryGeneratedTokenWithItsEos) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  torch::manual_seed(5);
  models::Seq2SeqModel model(config::load_model_config(
      "wu-lightconv-tiny", {"vocab_size=" + std::to_string(tokenizer.vocab_size())}));
  model->to(torch::kDouble);
  model->eval();
  // Sources of one length: a hypothesis's length limit (1.5 x the batch's longest source + 10) is then the
  // same in a batch of four as alone.
  std::vector<data::Seq2SeqExample> examples;
  for (int i = 0; i < 4; ++i) {
    data::Seq2SeqExample example;
    for (int t = 0; t < 5; ++t) example.source.push_back(10 + 7 * i + t);
    example.source.push_back(3);  // EOS
    examples.push_back(example);
  }
  TranslateOptions options;
  options.search.beam_size = 2;
  options.max_tokens = 1 << 20;  // one batch
  options.show_progress = false;
  DecodingCost cost;
  const std::vector<std::string> hypotheses = translate_examples(model, examples, tokenizer, options, &cost);

  int64_t expected = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    torch::Tensor source = torch::tensor(std::vector<int64_t>(examples[i].source.begin(), examples[i].source.end()),
                                         torch::kLong)
                               .unsqueeze(0);
    generate::SearchOptions search = options.search;
    search.max_length = static_cast<int64_t>(1.5 * 6) + 10;
    const std::vector<generate::Hypothesis> alone = generate::generate_batch(model, source, source.ne(0), search);
    ASSERT_EQ(alone.size(), 1u);
    ASSERT_FALSE(alone[0].tokens.empty());
    EXPECT_EQ(alone[0].tokens.back(), search.eos_id);
    expected += static_cast<int64_t>(alone[0].tokens.size());
    std::vector<int> ids;
    for (int64_t token : alone[0].tokens) {
      if (token != search.eos_id) ids.push_back(static_cast<int>(token));
    }
    EXPECT_EQ(hypotheses[i], tokenizer.decode(ids)) << "example " << i;
  }
  EXPECT_EQ(cost.generated_tokens, expected);
  EXPECT_GT(cost.seconds, 0);
  EXPECT_DOUBLE_EQ(cost.tokens_per_second(), static_cast<double>(expected) / cost.seconds);
  EXPECT_EQ(DecodingCost{}.tokens_per_second(), 0);  // nothing timed: no speed, not a division by zero
}

}  // namespace
}  // namespace cabert::eval
