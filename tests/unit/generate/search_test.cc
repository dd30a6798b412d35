// Greedy and beam search against exhaustive enumeration: a toy model over a 5-token vocabulary whose
// next-token distribution depends on the example, the step and the last two tokens, so every sequence's
// log-probability can be computed directly and all sequences up to max_length enumerated. The model keeps the
// token before last as its own per-row state: a search that reorders it wrongly gets wrong answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/generate/search.h"
#include "lib/ops/device.h"

namespace cabert::generate {
namespace {

constexpr int64_t kVocab = 5;  // [PAD]=0 1 [CLS]=2 (BOS) [SEP]=3 (EOS) 4
constexpr int64_t kPad = 0, kBos = 2, kEos = 3;

SearchOptions options_with(int64_t beam_size, int64_t max_length, double length_penalty = 1.0) {
  SearchOptions options;
  options.beam_size = beam_size;
  options.max_length = max_length;
  options.length_penalty = length_penalty;
  options.bos_id = kBos;
  options.eos_id = kEos;
  options.pad_id = kPad;
  return options;
}

// log P(token | example, step, before_last, last): [examples, steps, V, V, V], normalised over the last dim.
torch::Tensor random_table(int64_t examples, int64_t steps, uint64_t seed, double eos_bias = 0,
                           double repeat_bias = 0) {
  torch::manual_seed(seed);
  torch::Tensor logits = 2.0 * torch::randn({examples, steps, kVocab, kVocab, kVocab}, torch::kDouble);
  logits.select(-1, kEos) += eos_bias;
  for (int64_t token = 0; token < kVocab; ++token) logits.select(3, token).select(-2, token) += repeat_bias;
  return torch::log_softmax(logits, -1);
}

class TableModel : public StepModel {
 public:
  // Rows start as `beams` copies of every example in `examples`.
  TableModel(torch::Tensor table, std::vector<int64_t> examples, int64_t beams, bool ignore_reorder = false,
             torch::Device device = torch::kCPU)
      : table_(table.to(device)), ignore_reorder_(ignore_reorder), device_(device) {
    example_ = torch::tensor(examples, torch::kLong).repeat_interleave(beams).to(device);
    before_last_ = torch::full({example_.size(0)}, kBos, torch::TensorOptions(torch::kLong).device(device));
  }

  torch::Device device() const override { return device_; }

  torch::Tensor log_probs(const torch::Tensor& last_tokens, int64_t step) override {
    if (step != steps_) problem("step ", step, ", expected ", steps_);
    if (last_tokens.dim() != 1 || last_tokens.size(0) != example_.size(0)) {
      problem("last_tokens ", last_tokens.sizes(), " for ", example_.size(0), " rows");
    }
    if (step == 0 && !last_tokens.eq(kBos).all().item<bool>()) problem("step 0 does not start from BOS");
    ++steps_;
    reorders_since_step_ = 0;
    rows_per_step_.push_back(example_.size(0));
    torch::Tensor answer = table_.index({example_, step, before_last_, last_tokens});
    before_last_ = last_tokens.clone();
    return answer;
  }

  void reorder(const torch::Tensor& rows) override {
    ++reorders_;
    if (++reorders_since_step_ > 1) problem("two reorders without a step between them");
    const int64_t n = example_.size(0);
    if (rows.scalar_type() != torch::kLong || rows.dim() != 1 || !ops::on_device(rows.device(), device_)) {
      problem("rows ", rows.scalar_type(), rows.sizes(), " on ", rows.device());
    }
    if (rows.numel() == 0 || rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= n) {
      problem("rows outside [0, ", n, "): ", rows);
    }
    example_ = example_.index_select(0, rows);
    // Ignoring it keeps the row count right but the token before last in the wrong rows.
    if (!ignore_reorder_) before_last_ = before_last_.index_select(0, rows);
  }

  const std::vector<std::string>& problems() const { return problems_; }
  int64_t reorders() const { return reorders_; }
  const std::vector<int64_t>& rows_per_step() const { return rows_per_step_; }

 private:
  template <typename... Parts>
  void problem(Parts&&... parts) {
    problems_.push_back(str(std::forward<Parts>(parts)...));
  }

  torch::Tensor table_, example_, before_last_;
  bool ignore_reorder_;
  torch::Device device_;
  int64_t steps_ = 0, reorders_ = 0, reorders_since_step_ = 0;
  std::vector<int64_t> rows_per_step_;
  std::vector<std::string> problems_;
};

// The log-probability of `tokens` (ending with EOS) straight from the table.
double sequence_log_prob(const torch::Tensor& table, int64_t example, const std::vector<int64_t>& tokens) {
  auto t = table.accessor<double, 5>();
  int64_t before_last = kBos, last = kBos;
  double sum = 0;
  for (size_t step = 0; step < tokens.size(); ++step) {
    sum += t[example][step][before_last][last][tokens[step]];
    before_last = last;
    last = tokens[step];
  }
  return sum;
}

bool repeats_ngram(const std::vector<int64_t>& tokens, int64_t n) {
  if (n <= 0) return false;
  for (size_t i = 0; i + n <= tokens.size(); ++i) {
    for (size_t j = i + 1; j + n <= tokens.size(); ++j) {
      if (std::equal(tokens.begin() + i, tokens.begin() + i + n, tokens.begin() + j)) return true;
    }
  }
  return false;
}

// Every sequence the search may produce (min_length..max_length tokens other than PAD and EOS, then EOS, no
// repeated n-gram), best score first.
std::vector<Hypothesis> exhaustive(const torch::Tensor& table, int64_t example, const SearchOptions& options) {
  std::vector<Hypothesis> all;
  std::vector<int64_t> prefix;
  std::function<void()> extend = [&] {
    const int64_t length = static_cast<int64_t>(prefix.size());
    if (length >= options.min_length) {
      Hypothesis hypothesis;
      hypothesis.tokens = prefix;
      hypothesis.tokens.push_back(options.eos_id);
      hypothesis.log_prob = sequence_log_prob(table, example, hypothesis.tokens);
      hypothesis.score = hypothesis.log_prob / std::pow(length + 1.0, options.length_penalty);
      all.push_back(hypothesis);
    }
    if (length == options.max_length) return;
    for (int64_t token = 0; token < kVocab; ++token) {
      if (token == options.pad_id || token == options.eos_id) continue;
      prefix.push_back(token);
      if (!repeats_ngram(prefix, options.no_repeat_ngram)) extend();
      prefix.pop_back();
    }
  };
  extend();
  std::sort(all.begin(), all.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return all;
}

int64_t count_sequences(int64_t max_length) {  // 3 tokens may precede EOS: 1 + 3 + ... + 3^max_length
  int64_t count = 0, power = 1;
  for (int64_t length = 0; length <= max_length; ++length, power *= 3) count += power;
  return count;
}

std::string show(const std::vector<int64_t>& tokens) {
  std::string text;
  for (int64_t token : tokens) text += std::to_string(token) + " ";
  return text;
}

void expect_same(const std::vector<Hypothesis>& actual, const std::vector<Hypothesis>& expected, size_t n,
                 const std::string& context) {
  ASSERT_GE(actual.size(), n) << context;
  ASSERT_GE(expected.size(), n) << context;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(show(actual[i].tokens), show(expected[i].tokens)) << context << " rank " << i;
    EXPECT_NEAR(actual[i].score, expected[i].score, 1e-9) << context << " rank " << i;
    EXPECT_NEAR(actual[i].log_prob, expected[i].log_prob, 1e-9) << context << " rank " << i;
  }
}

std::string usage_error(const SearchOptions& options, int64_t batch = 1) {
  TableModel model(random_table(1, 4, 1), {0}, options.beam_size > 0 ? options.beam_size : 1);
  try {
    beam_search(model, batch, options);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(RepeatedNgramMask, BansTheTokenThatWouldCloseARepeatedNgram) {
  const torch::Tensor history = torch::tensor({1, 2, 4, 1, 2}, torch::kLong).unsqueeze(0);
  auto banned = [&](int64_t n) {
    std::vector<int64_t> tokens;
    torch::Tensor mask = repeated_ngram_mask(history, n, kVocab)[0];
    for (int64_t token = 0; token < kVocab; ++token) {
      if (mask[token].item<bool>()) tokens.push_back(token);
    }
    return show(tokens);
  };
  EXPECT_EQ(banned(1), "1 2 4 ");  // every token seen
  EXPECT_EQ(banned(2), "4 ");      // "2 4" exists and the last token is 2
  EXPECT_EQ(banned(3), "4 ");      // "1 2 4" exists and the last two are "1 2"
  EXPECT_EQ(banned(4), "");        // "4 1 2" never followed by anything
  EXPECT_EQ(banned(6), "");        // shorter than n
}

TEST(GreedySearch, TakesTheMostLikelyTokenAtEveryStep) {
  const SearchOptions options = options_with(1, 4);
  for (uint64_t seed : {1, 2, 3}) {
    const torch::Tensor table = random_table(2, options.max_length + 1, seed);
    auto t = table.accessor<double, 5>();
    TableModel model(table, {0, 1}, 1);
    const std::vector<Hypothesis> results = greedy_search(model, 2, options);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_TRUE(model.problems().empty()) << model.problems().front();
    for (int64_t example = 0; example < 2; ++example) {
      std::vector<int64_t> expected;
      int64_t before_last = kBos, last = kBos;
      for (int64_t step = 0; expected.empty() || expected.back() != kEos; ++step) {
        int64_t best = kEos;  // forced at max_length
        if (step < options.max_length) {
          auto row = t[example][step][before_last][last];
          best = 1;  // any token but PAD
          for (int64_t token = 0; token < kVocab; ++token) {
            if (token != kPad && row[token] > row[best]) best = token;
          }
        }
        expected.push_back(best);
        before_last = last;
        last = best;
      }
      const double log_prob = sequence_log_prob(table, example, expected);
      EXPECT_EQ(show(results[example].tokens), show(expected)) << "seed " << seed;
      EXPECT_NEAR(results[example].log_prob, log_prob, 1e-9);
      EXPECT_NEAR(results[example].score, log_prob / expected.size(), 1e-9);
    }
  }
}

TEST(GreedySearch, EqualsBeamSearchOfWidthOne) {
  const SearchOptions options = options_with(1, 5, 0.7);
  const torch::Tensor table = random_table(3, options.max_length + 1, 11);
  TableModel greedy_model(table, {0, 1, 2}, 1), beam_model(table, {0, 1, 2}, 1);
  const auto greedy = greedy_search(greedy_model, 3, options);
  const auto beam = beam_search(beam_model, 3, options);
  for (size_t example = 0; example < 3; ++example) {
    ASSERT_EQ(beam[example].size(), 1u);
    expect_same({greedy[example]}, beam[example], 1, "example " + std::to_string(example));
  }
}

TEST(BeamSearch, WideEnoughEqualsExhaustiveSearch) {
  for (double length_penalty : {0.0, 1.0, 2.0}) {
    for (uint64_t seed : {1, 2, 3, 4}) {
      const SearchOptions options = options_with(count_sequences(3), 3, length_penalty);
      const torch::Tensor table = random_table(1, options.max_length + 1, seed);
      TableModel model(table, {0}, options.beam_size);
      const auto results = beam_search(model, 1, options);
      const auto expected = exhaustive(table, 0, options);
      const std::string context = "penalty " + std::to_string(length_penalty) + " seed " + std::to_string(seed);
      EXPECT_TRUE(model.problems().empty()) << model.problems().front();
      ASSERT_EQ(results.size(), 1u);
      EXPECT_EQ(results[0].size(), expected.size()) << context;  // every sequence, all of them finished
      expect_same(results[0], expected, expected.size(), context);
    }
  }
}

TEST(BeamSearch, NBestIsSortedAndMatchesTheExhaustiveTopN) {
  // Wide beams that stop at beam_size finished hypotheses, before all sequences are seen.
  const SearchOptions options = options_with(count_sequences(2), 4, 1.0);
  for (uint64_t seed : {5, 6, 7}) {
    const torch::Tensor table = random_table(1, options.max_length + 1, seed);
    TableModel model(table, {0}, options.beam_size);
    const auto results = beam_search(model, 1, options);
    ASSERT_EQ(results[0].size(), static_cast<size_t>(options.beam_size));
    EXPECT_TRUE(std::is_sorted(results[0].begin(), results[0].end(),
                               [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; }));
    // The top of the list is settled long before the search stops.
    expect_same(results[0], exhaustive(table, 0, options), 3, "seed " + std::to_string(seed));
  }
}

TEST(BeamSearch, DependsOnTheModelStateFollowingReorder) {
  // The same search on a model that leaves its state in place must go wrong somewhere, or the tests above
  // would not notice a search that reorders wrongly.
  const SearchOptions options = options_with(count_sequences(3), 3);
  bool differs = false;
  for (uint64_t seed : {1, 2, 3, 4}) {
    const torch::Tensor table = random_table(1, options.max_length + 1, seed);
    TableModel model(table, {0}, options.beam_size, /*ignore_reorder=*/true);
    const auto results = beam_search(model, 1, options);
    const auto expected = exhaustive(table, 0, options);
    ASSERT_EQ(results[0].size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      differs = differs || show(results[0][i].tokens) != show(expected[i].tokens) ||
                std::abs(results[0][i].score - expected[i].score) > 1e-9;
    }
  }
  EXPECT_TRUE(differs);
}

TEST(BeamSearch, MinLengthForbidsEarlyEos) {
  SearchOptions options = options_with(count_sequences(4), 4, /*length_penalty=*/0.0);
  const torch::Tensor table = random_table(1, options.max_length + 1, 21, /*eos_bias=*/6.0);
  TableModel free_model(table, {0}, options.beam_size);
  EXPECT_EQ(show(beam_search(free_model, 1, options)[0][0].tokens), show({kEos}));  // EOS first without min_length

  options.min_length = 2;
  TableModel model(table, {0}, options.beam_size);
  const auto results = beam_search(model, 1, options);
  for (const Hypothesis& hypothesis : results[0]) {
    ASSERT_GE(hypothesis.tokens.size(), 3u) << show(hypothesis.tokens);
    EXPECT_EQ(std::count(hypothesis.tokens.begin(), hypothesis.tokens.end(), kEos), 1) << show(hypothesis.tokens);
  }
  expect_same(results[0], exhaustive(table, 0, options), 5, "min_length 2");

  TableModel greedy_model(table, {0}, 1);
  const Hypothesis greedy = greedy_search(greedy_model, 1, options)[0];
  EXPECT_GE(greedy.tokens.size(), 3u) << show(greedy.tokens);
  EXPECT_EQ(std::count(greedy.tokens.begin(), greedy.tokens.end(), kEos), 1) << show(greedy.tokens);
}

TEST(BeamSearch, MaxLengthForcesEos) {
  const SearchOptions options = options_with(3, 3);
  const torch::Tensor table = random_table(2, options.max_length + 1, 31, /*eos_bias=*/-8.0);
  TableModel model(table, {0, 1}, options.beam_size);
  const auto results = beam_search(model, 2, options);
  EXPECT_EQ(model.rows_per_step().size(), static_cast<size_t>(options.max_length + 1));
  for (int64_t example = 0; example < 2; ++example) {
    ASSERT_EQ(results[example].size(), 3u);
    for (const Hypothesis& hypothesis : results[example]) {
      EXPECT_EQ(hypothesis.tokens.size(), 4u) << show(hypothesis.tokens);  // EOS is unlikely: always at the end
      EXPECT_EQ(hypothesis.tokens.back(), kEos);
      // EOS keeps its own (small) log-probability when forced.
      EXPECT_NEAR(hypothesis.log_prob, sequence_log_prob(table, example, hypothesis.tokens), 1e-9);
      const std::vector<int64_t> before_eos(hypothesis.tokens.begin(), hypothesis.tokens.end() - 1);
      EXPECT_LT(hypothesis.log_prob, sequence_log_prob(table, example, before_eos) - 3.0);
    }
  }
  TableModel greedy_model(table, {0, 1}, 1);
  for (const Hypothesis& hypothesis : greedy_search(greedy_model, 2, options)) {
    EXPECT_EQ(hypothesis.tokens.size(), 4u) << show(hypothesis.tokens);
    EXPECT_EQ(hypothesis.tokens.back(), kEos);
    EXPECT_EQ(std::count(hypothesis.tokens.begin(), hypothesis.tokens.end(), kEos), 1);
  }
}

TEST(BeamSearch, NoRepeatNgramNeverRepeatsABigram) {
  SearchOptions options = options_with(6, 5);
  const torch::Tensor table = random_table(2, options.max_length + 1, 41, /*eos_bias=*/-3.0, /*repeat_bias=*/4.0);
  TableModel free_model(table, {0, 1}, 1);
  const auto free = greedy_search(free_model, 2, options);
  EXPECT_TRUE(repeats_ngram(free[0].tokens, 2) || repeats_ngram(free[1].tokens, 2))  // the model likes repeats
      << show(free[0].tokens) << "| " << show(free[1].tokens);

  options.no_repeat_ngram = 2;
  TableModel model(table, {0, 1}, options.beam_size);
  for (const auto& hypotheses : beam_search(model, 2, options)) {
    ASSERT_FALSE(hypotheses.empty());
    for (const Hypothesis& hypothesis : hypotheses) {
      EXPECT_FALSE(repeats_ngram(hypothesis.tokens, 2)) << show(hypothesis.tokens);
    }
  }
  TableModel greedy_model(table, {0, 1}, 1);
  for (const Hypothesis& hypothesis : greedy_search(greedy_model, 2, options)) {
    EXPECT_FALSE(repeats_ngram(hypothesis.tokens, 2)) << show(hypothesis.tokens);
  }

  // And the best sequences among those without a repeated bigram.
  options.beam_size = count_sequences(options.max_length);
  TableModel wide_model(table, {0}, options.beam_size);
  expect_same(beam_search(wide_model, 1, options)[0], exhaustive(table, 0, options), 5, "no_repeat_ngram 2");
}

TEST(BeamSearch, BatchedEqualsOneByOne) {
  const int64_t batch = 4;
  SearchOptions options = options_with(3, 5, 1.0);
  options.min_length = 2;  // long enough for the state (the token before last) to matter
  const torch::Tensor table = random_table(batch, options.max_length + 1, 51);
  TableModel model(table, {0, 1, 2, 3}, options.beam_size);
  const auto batched = beam_search(model, batch, options);
  EXPECT_TRUE(model.problems().empty()) << model.problems().front();
  EXPECT_GT(model.reorders(), 0);
  // Some examples finish before others and leave the batch.
  const auto& rows = model.rows_per_step();
  EXPECT_EQ(rows.front(), batch * options.beam_size);
  EXPECT_TRUE(std::adjacent_find(rows.begin(), rows.end(), std::greater<int64_t>()) != rows.end());
  for (int64_t example = 0; example < batch; ++example) {
    TableModel alone(table, {example}, options.beam_size);
    const auto single = beam_search(alone, 1, options);
    ASSERT_EQ(batched[example].size(), single[0].size());
    expect_same(batched[example], single[0], single[0].size(), "example " + std::to_string(example));
    for (const Hypothesis& hypothesis : batched[example]) {  // bookkeeping right under pruning
      EXPECT_NEAR(hypothesis.log_prob, sequence_log_prob(table, example, hypothesis.tokens), 1e-9);
    }
  }

  TableModel greedy_model(table, {0, 1, 2, 3}, 1);
  const auto greedy = greedy_search(greedy_model, batch, options);
  EXPECT_TRUE(greedy_model.problems().empty()) << greedy_model.problems().front();
  for (int64_t example = 0; example < batch; ++example) {
    TableModel alone(table, {example}, 1);
    expect_same({greedy[example]}, greedy_search(alone, 1, options), 1, "greedy example " + std::to_string(example));
  }
}

TEST(BeamSearch, SameOnCudaAsOnCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t batch = 3;
  SearchOptions options = options_with(4, 5, 1.0);
  options.no_repeat_ngram = 2;
  const torch::Tensor table = random_table(batch, options.max_length + 1, 61);
  TableModel cpu_model(table, {0, 1, 2}, options.beam_size);
  TableModel cuda_model(table, {0, 1, 2}, options.beam_size, false, torch::Device(torch::kCUDA));
  const auto on_cpu = beam_search(cpu_model, batch, options);
  const auto on_cuda = beam_search(cuda_model, batch, options);
  EXPECT_TRUE(cuda_model.problems().empty()) << cuda_model.problems().front();
  for (int64_t example = 0; example < batch; ++example) {
    ASSERT_EQ(on_cuda[example].size(), on_cpu[example].size());
    expect_same(on_cuda[example], on_cpu[example], on_cpu[example].size(), "example " + std::to_string(example));
  }
  TableModel cpu_greedy(table, {0, 1, 2}, 1), cuda_greedy(table, {0, 1, 2}, 1, false, torch::Device(torch::kCUDA));
  const auto greedy_cpu = greedy_search(cpu_greedy, batch, options);
  const auto greedy_cuda = greedy_search(cuda_greedy, batch, options);
  for (int64_t example = 0; example < batch; ++example) {
    expect_same({greedy_cuda[example]}, {greedy_cpu[example]}, 1, "greedy example " + std::to_string(example));
  }
}

TEST(BeamSearch, EmptyBatchReturnsNothing) {
  TableModel model(random_table(1, 4, 1), {}, 2);
  EXPECT_TRUE(beam_search(model, 0, options_with(2, 3)).empty());
  EXPECT_TRUE(greedy_search(model, 0, options_with(2, 3)).empty());
  EXPECT_TRUE(model.rows_per_step().empty());
}

TEST(SearchOptions, RefusesImpossibleSearches) {
  SearchOptions options = options_with(0, 3);
  EXPECT_EQ(usage_error(options), "beam_size: expected >= 1, got 0");
  options = options_with(2, 3);
  options.min_length = 4;
  EXPECT_EQ(usage_error(options), "max_length: expected >= min_length (4), got 3");
  options = options_with(2, 3);
  options.min_length = -1;
  EXPECT_EQ(usage_error(options), "min_length: expected >= 0, got -1");
  options = options_with(2, 3);
  options.no_repeat_ngram = -2;
  EXPECT_EQ(usage_error(options), "no_repeat_ngram: expected >= 0 (0 = off), got -2");
  options = options_with(2, 3);
  options.eos_id = kPad;
  EXPECT_EQ(usage_error(options), "eos_id: expected an id other than pad_id (0), got 0");
  options = options_with(2, 3);
  options.pad_id = kVocab;  // the model answers for 5 tokens
  EXPECT_EQ(usage_error(options), "vocabulary size: expected > 5 (the largest of bos_id, eos_id, pad_id), got 5");
  EXPECT_EQ(usage_error(options_with(2, 3), -1), "batch: expected >= 0, got -1");
  EXPECT_EQ(usage_error(options_with(2, 3)), "");
}

}  // namespace
}  // namespace cabert::generate
