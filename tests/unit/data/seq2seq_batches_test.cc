// Encoder-decoder batches: padding and the shifted decoder input by hand, and the token-budget batching's
// contract (every example once, within the row and token budgets, sorted by length).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "lib/core/errors.h"
#include "lib/data/seq2seq_batches.h"

namespace cabert::data {
namespace {

// A [rows, columns] int64 tensor from equally long rows.
torch::Tensor ids(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return torch::tensor(flat, torch::kInt64).view({static_cast<int64_t>(rows.size()), -1});
}

std::vector<Seq2SeqExample> two_examples() { return {{{7, 8, 3}, {9, 10}}, {{11, 3}, {12}}}; }

TEST(MakeSeq2SeqBatch, PadsAndShiftsTheTargetBehindBos) {
  Seq2SeqBatch batch = make_seq2seq_batch(two_examples(), {0, 1});
  EXPECT_TRUE(torch::equal(batch.source, ids({{7, 8, 3}, {11, 3, 0}})));
  EXPECT_TRUE(torch::equal(batch.target_in, ids({{2, 9, 10}, {2, 12, 0}})));
  EXPECT_TRUE(torch::equal(batch.target_out, ids({{9, 10, 3}, {12, 3, 0}})));
  EXPECT_EQ(batch.source_mask.scalar_type(), torch::kBool);
  EXPECT_EQ(batch.target_mask.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(batch.source_mask, ids({{1, 1, 1}, {1, 1, 0}}).to(torch::kBool)));
  EXPECT_TRUE(torch::equal(batch.target_mask, ids({{1, 1, 1}, {1, 1, 0}}).to(torch::kBool)));
  EXPECT_EQ(batch.target_tokens, 5);  // 2 + EOS, 1 + EOS
  EXPECT_EQ(batch.source_tokens, 5);
}

TEST(MakeSeq2SeqBatch, RowsComeInTheOrderAsked) {
  Seq2SeqBatch batch = make_seq2seq_batch(two_examples(), {1, 0});
  EXPECT_TRUE(torch::equal(batch.source, ids({{11, 3, 0}, {7, 8, 3}})));
  EXPECT_TRUE(torch::equal(batch.target_in, ids({{2, 12, 0}, {2, 9, 10}})));
  EXPECT_TRUE(torch::equal(batch.target_out, ids({{12, 3, 0}, {9, 10, 3}})));
  EXPECT_TRUE(torch::equal(batch.source_mask, ids({{1, 1, 0}, {1, 1, 1}}).to(torch::kBool)));
  EXPECT_TRUE(torch::equal(batch.target_mask, ids({{1, 1, 0}, {1, 1, 1}}).to(torch::kBool)));
  Seq2SeqBatch one = make_seq2seq_batch(two_examples(), {1});
  EXPECT_TRUE(torch::equal(one.source, ids({{11, 3}})));
  EXPECT_TRUE(torch::equal(one.target_out, ids({{12, 3}})));
  EXPECT_EQ(one.target_tokens, 2);
  EXPECT_EQ(one.source_tokens, 2);
}

TEST(TokenBudgetBatches, EveryExampleOnceWithinTheBudgetsSortedByLength) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> length(1, 40);
  std::vector<Seq2SeqExample> examples(200);
  for (Seq2SeqExample& e : examples) {
    e.source.assign(static_cast<size_t>(length(rng)), 5);
    e.target.assign(static_cast<size_t>(length(rng)), 6);
  }
  const int64_t max_tokens = 600, max_rows = 12;
  auto batches = token_budget_batches(examples, max_tokens, max_rows);
  std::vector<int> seen(examples.size(), 0);
  std::vector<size_t> order;
  size_t multi_row = 0;
  for (const auto& batch : batches) {
    ASSERT_FALSE(batch.empty());
    EXPECT_LE(static_cast<int64_t>(batch.size()), max_rows);
    size_t source = 0, target = 0;
    for (size_t index : batch) {
      ASSERT_LT(index, examples.size());
      ++seen[index];
      order.push_back(index);
      source = std::max(source, examples[index].source.size());
      target = std::max(target, examples[index].target.size());
    }
    if (batch.size() > 1) {
      ++multi_row;
      EXPECT_LE(static_cast<int64_t>(batch.size() * (source + target + 1)), max_tokens);
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "example " << i;
  EXPECT_GT(multi_row, 0u);  // the budget check above is not vacuous
  EXPECT_LT(batches.size(), examples.size());
  for (size_t i = 1; i < order.size(); ++i) {
    const Seq2SeqExample& a = examples[order[i - 1]];
    const Seq2SeqExample& b = examples[order[i]];
    EXPECT_LE(a.source.size(), b.source.size()) << "position " << i;
    if (a.source.size() == b.source.size()) {
      EXPECT_LE(a.target.size(), b.target.size()) << "position " << i;
    }
  }
}

TEST(TokenBudgetBatches, AnExampleOverTheBudgetGetsABatchOfItsOwn) {
  std::vector<Seq2SeqExample> examples = {
      {{5, 3}, {6}}, {std::vector<int32_t>(50, 5), std::vector<int32_t>(50, 6)}, {{5, 3}, {6}}, {{5, 5, 3}, {6, 6}}};
  auto batches = token_budget_batches(examples, 40, 8);
  std::vector<int> seen(examples.size(), 0);
  bool alone = false;
  for (const auto& batch : batches) {
    for (size_t index : batch) ++seen[index];
    if (std::find(batch.begin(), batch.end(), size_t{1}) != batch.end()) alone = batch.size() == 1;
  }
  EXPECT_TRUE(alone);
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 1, 1}));
}

// fairseq's count (the padded longer side): 4 rows of source 9 and target 4 (+EOS = 5) are 4 x 9 = 36 tokens, within
// a budget of 36, where cabert's padded sum counts 4 x (9 + 5) = 56 and fits 2 rows (2 x 14 = 28; 3 x 14 = 42 > 36).
TEST(TokenBudgetBatches, TheLongerSideCountsAsFairseqCounts) {
  std::vector<Seq2SeqExample> examples(8, Seq2SeqExample{std::vector<int32_t>(9, 5), std::vector<int32_t>(4, 6)});
  auto longer = token_budget_batches(examples, 36, 100, TokenCount::kPaddedLonger);
  ASSERT_EQ(longer.size(), 2u);
  EXPECT_EQ(longer[0].size(), 4u);
  EXPECT_EQ(longer[1].size(), 4u);
  auto sum = token_budget_batches(examples, 36, 100, TokenCount::kPaddedSum);
  ASSERT_EQ(sum.size(), 4u);
  for (const auto& batch : sum) EXPECT_EQ(batch.size(), 2u);
  // The target side can be the longer one: source 2, target 9 (+EOS 10): 3 rows x 10 = 30 <= 36, 4 x 10 > 36.
  std::vector<Seq2SeqExample> long_targets(6, Seq2SeqExample{std::vector<int32_t>(2, 5), std::vector<int32_t>(9, 6)});
  auto by_target = token_budget_batches(long_targets, 36, 100, TokenCount::kPaddedLonger);
  ASSERT_EQ(by_target.size(), 2u);
  EXPECT_EQ(by_target[0].size(), 3u);
}

TEST(TokenBudgetBatches, RefusesAnEmptyBudget) {
  const std::vector<Seq2SeqExample> examples = two_examples();
  EXPECT_THROW(token_budget_batches(examples, 0, 8), UsageError);
  EXPECT_THROW(token_budget_batches(examples, 100, 0), UsageError);
  EXPECT_THROW(token_budget_batches(examples, -5, 8), UsageError);
  EXPECT_NO_THROW(token_budget_batches(examples, 100, 8));
}

}  // namespace
}  // namespace cabert::data

namespace cabert::data {
namespace {

// Span corruption of padded pre-training rows: specials and padding are not part of the chunk, each
// example's input + target rebuild the chunk exactly, EOS closes the input, and over many rows the noise is
// T5's 15%.
TEST(CorruptRows, ChunksAreTheRegularTokensAndReconstructExactly) {
  SpanCorruptionOptions options;
  options.first_sentinel_id = 5;
  options.num_sentinels = 20;  // ids 5..24; regular ids from 25
  std::mt19937_64 draw(3), rng(17);
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<int32_t>> expected;
  const int64_t width = 40;
  for (int r = 0; r < 200; ++r) {
    const int64_t length = 10 + static_cast<int64_t>(draw() % 28);  // [CLS] + length tokens + [SEP] + padding
    std::vector<int64_t> row{2};
    std::vector<int32_t> chunk;
    for (int64_t i = 0; i < length; ++i) {
      // Mostly regular ids, some [UNK] (kept), one [SEP] in the middle (dropped like every special).
      int64_t id = draw() % 9 == 0 ? 1 : 25 + static_cast<int64_t>(draw() % 500);
      if (i == length / 2) id = 3;
      row.push_back(id);
      if (id != 3) chunk.push_back(static_cast<int32_t>(id));
    }
    row.push_back(3);
    row.resize(width, 0);
    rows.push_back(row);
    expected.push_back(chunk);
  }
  torch::Tensor batch = ids(rows);
  CorruptedRows out = corrupt_rows(batch, batch.ne(0), options, rng);
  ASSERT_EQ(out.examples.size(), rows.size());
  int64_t noise = 0, total = 0, spans = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(out.chunks[r], expected[r]) << "row " << r;
    const Seq2SeqExample& example = out.examples[r];
    ASSERT_EQ(example.source.back(), 3) << "the input ends with EOS";
    SpanCorruptionExample corrupted;
    corrupted.input.assign(example.source.begin(), example.source.end() - 1);
    corrupted.target = example.target;
    for (int32_t id : corrupted.input) corrupted.noise_spans += id >= 5 && id < 25;
    corrupted.noise_tokens = static_cast<int32_t>(corrupted.target.size()) - corrupted.noise_spans - 1;
    EXPECT_EQ(reconstruct(corrupted, 5, 20), expected[r]) << "row " << r;
    noise += corrupted.noise_tokens;
    spans += corrupted.noise_spans;
    total += static_cast<int64_t>(expected[r].size());
  }
  EXPECT_EQ(out.noise_tokens, noise);
  EXPECT_EQ(out.chunk_tokens, total);
  // n = round(0.15 L) per row: the overall fraction is 0.15 up to rounding; spans average n / 3 tokens.
  EXPECT_NEAR(static_cast<double>(noise) / total, 0.15, 0.01);
  EXPECT_NEAR(static_cast<double>(noise) / spans, 3.0, 0.6);
}

TEST(CorruptRows, RowsWithoutTwoRegularTokensAreSkipped) {
  SpanCorruptionOptions options;
  options.num_sentinels = 4;  // regular ids from 9
  std::mt19937_64 rng(1);
  torch::Tensor batch = ids({{2, 9, 3, 0}, {2, 9, 10, 3}, {2, 5, 6, 3}});
  CorruptedRows out = corrupt_rows(batch, batch.ne(0), options, rng);
  ASSERT_EQ(out.examples.size(), 1u);
  EXPECT_EQ(out.chunks[0], (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(out.chunk_tokens, 2);
}

// The ranks' shares of a joint batch are contiguous, in order, cover it once and differ by at most one row.
TEST(RankShare, SplitsAJointBatchIntoContiguousShares) {
  const std::vector<size_t> batch{9, 4, 7, 1, 3, 8, 2};
  EXPECT_EQ(rank_share(batch, 0, 1), batch);
  EXPECT_EQ(rank_share(batch, 0, 2), (std::vector<size_t>{9, 4, 7}));
  EXPECT_EQ(rank_share(batch, 1, 2), (std::vector<size_t>{1, 3, 8, 2}));
  for (int world = 1; world <= 9; ++world) {
    std::vector<size_t> joined;
    size_t smallest = batch.size(), largest = 0;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<size_t> share = rank_share(batch, rank, world);
      joined.insert(joined.end(), share.begin(), share.end());
      smallest = std::min(smallest, share.size());
      largest = std::max(largest, share.size());
    }
    EXPECT_EQ(joined, batch) << world;
    EXPECT_LE(largest - smallest, 1u) << world;
  }
  EXPECT_TRUE(rank_share({5}, 0, 2).empty());
  EXPECT_EQ(rank_share({5}, 1, 2), (std::vector<size_t>{5}));
  EXPECT_THROW(rank_share(batch, 2, 2), Error);
}

// The target tokens make_seq2seq_batch counts, from the examples alone (what every rank knows of the others).
TEST(RankShare, TargetTokensMatchTheBatchCount) {
  std::vector<Seq2SeqExample> examples(3);
  examples[0].target = {5, 6};
  examples[1].target = {7};
  examples[2].target = {8, 9, 10, 11};
  examples[0].source = examples[1].source = examples[2].source = {4, 3};
  const std::vector<size_t> rows{2, 0};
  EXPECT_EQ(target_tokens(examples, rows), make_seq2seq_batch(examples, rows).target_tokens);
  EXPECT_EQ(target_tokens(examples, rows), 8);
}

}  // namespace
}  // namespace cabert::data
