#include "lib/data/span_corruption.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lib/core/errors.h"

namespace cabert::data {
namespace {

constexpr int32_t kFirstSentinel = 5;  // <extra_id_0> in cabert's tokenizer (text::SpecialTokens)
constexpr int32_t kSentinels = 100;

std::vector<int32_t> iota_tokens(int32_t length, int32_t first = 200) {
  std::vector<int32_t> tokens(static_cast<size_t>(length));
  for (int32_t i = 0; i < length; ++i) tokens[static_cast<size_t>(i)] = first + i;
  return tokens;
}

bool is_sentinel(int32_t id) { return id >= kFirstSentinel && id < kFirstSentinel + kSentinels; }

template <typename Fn>
std::string usage_message(Fn&& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

template <typename Fn>
std::string data_message(Fn&& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    EXPECT_EQ(e.exit_code(), 3);
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

// The counts restated independently of the library: std::nearbyint rounds half to even in the default
// floating-point environment, like Python's round() in T5's random_spans_helper.
SpanCounts expected_counts(int64_t length, double density = 0.15, double mean = 3.0) {
  int64_t noise = static_cast<int64_t>(std::nearbyint(static_cast<double>(length) * density));
  noise = std::min<int64_t>(std::max<int64_t>(noise, 1), length - 1);
  int64_t spans = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(noise) / mean)));
  return {noise, spans};
}

// Structure every example of corrupt_spans must have, and exact reconstruction.
void check_example(const std::vector<int32_t>& tokens, const SpanCorruptionExample& example) {
  const auto length = static_cast<int64_t>(tokens.size());
  const SpanCounts counts = expected_counts(length);
  ASSERT_EQ(example.noise_tokens, counts.noise_tokens);
  ASSERT_EQ(example.noise_spans, counts.noise_spans);
  const int32_t s = example.noise_spans;
  ASSERT_EQ(static_cast<int64_t>(example.input.size()), length - example.noise_tokens + s);
  ASSERT_EQ(static_cast<int64_t>(example.target.size()), example.noise_tokens + s + 1);

  // Input: starts with a non-noise token (the first span is non-noise), sentinels 0..s-1 in order, never two
  // sentinels side by side (non-noise spans are non-empty), ends with the last sentinel (the last span is noise).
  ASSERT_FALSE(is_sentinel(example.input.front()));
  ASSERT_EQ(example.input.back(), kFirstSentinel + s - 1);
  int32_t next = 0;
  for (size_t i = 0; i < example.input.size(); ++i) {
    if (!is_sentinel(example.input[i])) continue;
    ASSERT_EQ(example.input[i], kFirstSentinel + next) << "input position " << i;
    ++next;
    if (i > 0) {
      ASSERT_FALSE(is_sentinel(example.input[i - 1])) << "adjacent sentinels at input position " << i;
    }
  }
  ASSERT_EQ(next, s);

  // Target: <extra_id_0> span0 ... <extra_id_{s-1}> span{s-1} <extra_id_s>, every span non-empty.
  next = 0;
  for (size_t t = 0; t < example.target.size(); ++t) {
    if (!is_sentinel(example.target[t])) continue;
    ASSERT_EQ(example.target[t], kFirstSentinel + next) << "target position " << t;
    if (t > 0) {
      ASSERT_FALSE(is_sentinel(example.target[t - 1])) << "empty noise span before target position " << t;
    }
    ++next;
  }
  ASSERT_EQ(next, s + 1);
  ASSERT_EQ(example.target.front(), kFirstSentinel);
  ASSERT_EQ(example.target.back(), kFirstSentinel + s);

  ASSERT_EQ(reconstruct(example, kFirstSentinel, kSentinels), tokens);
}

TEST(SpanCorruption, CountsFollowTheFormulasWithHalfToEvenRounding) {
  using Pair = std::pair<int64_t, int64_t>;
  const SpanCorruptionOptions options;
  auto counts = [&](int64_t length) {
    const SpanCounts c = span_counts(length, options);
    return std::make_pair(c.noise_tokens, c.noise_spans);
  };
  EXPECT_EQ(counts(2), Pair(1, 1));   // round(0.3) = 0, clamped to 1
  EXPECT_EQ(counts(10), Pair(2, 1));  // round(1.5) = 2, round(0.67) = 1
  EXPECT_EQ(counts(30), Pair(4, 1));  // round(4.5) = 4 (half-away-from-zero: 5)
  EXPECT_EQ(counts(50), Pair(8, 3));  // round(7.5) = 8, round(2.67) = 3
  EXPECT_EQ(counts(100), Pair(15, 5));
  EXPECT_EQ(counts(512), Pair(77, 26));  // 76.8 -> 77, 25.67 -> 26
  EXPECT_EQ(counts(568), Pair(85, 28));  // T5's 512-token inputs
  EXPECT_EQ(counts(1990), Pair(298, 99));
  EXPECT_EQ(counts(2000), Pair(300, 99));  // round(100) capped: 100 sentinels

  SpanCorruptionOptions short_spans;
  short_spans.mean_noise_span_length = 0.5;  // round(2 / 0.5) = 4 spans of 2 tokens: capped at 2
  EXPECT_EQ(span_counts(10, short_spans).noise_spans, 2);
  SpanCorruptionOptions dense;
  dense.noise_density = 0.9;
  dense.mean_noise_span_length = 1;  // 9 noise spans but a single non-noise token: capped at 1
  EXPECT_EQ(span_counts(10, dense).noise_tokens, 9);
  EXPECT_EQ(span_counts(10, dense).noise_spans, 1);
}

// Default options, L = 10: n = round(1.5) = 2, s = round(2 / 3) = 1, 8 non-noise tokens. Both segmentations
// (2 into 1, 8 into 1) have one outcome and draw nothing, so: non-noise t0..t7, then noise t8 t9.
//   input  = t0 .. t7 <extra_id_0>
//   target = <extra_id_0> t8 t9 <extra_id_1>
TEST(SpanCorruption, HandCheckedDefaultOptionsOnTenTokens) {
  std::mt19937_64 rng(42), untouched(42);
  const auto tokens = iota_tokens(10);
  const SpanCorruptionExample example = corrupt_spans(tokens, SpanCorruptionOptions(), rng);
  EXPECT_EQ(example.input, (std::vector<int32_t>{200, 201, 202, 203, 204, 205, 206, 207, 5}));
  EXPECT_EQ(example.target, (std::vector<int32_t>{5, 208, 209, 6}));
  EXPECT_EQ(example.noise_tokens, 2);
  EXPECT_EQ(example.noise_spans, 1);
  EXPECT_TRUE(rng == untouched);
}

// Density 0.3, mean span 1.5, L = 10, tokens 200..209 (ordinary ids), std::mt19937_64(42). The engine's raw outputs are fixed
// by the C++ standard; the first six are
//   r0 = 13930160852258120406, r1 = 11788048577503494824, r2 = 13874630024467741450,
//   r3 = 2513787319205155662,  r4 = 16662371453428439381, r5 = 1735254072534978428.
// n = round(3.0) = 3 noise tokens, s = round(3 / 1.5) = 2 spans, 7 non-noise tokens.
// Noise segmentation, 3 items into 2: marks [1, 0] over the 2 gaps; Fisher-Yates i = 1: r0 mod 2 = 0 (no
//   rejection: 2^64 mod 2 = 0), swap -> [0, 1]: item 2 starts segment 1 -> lengths [2, 1].
// Non-noise segmentation, 7 items into 2: marks [1, 0, 0, 0, 0, 0] over 6 gaps; Fisher-Yates
//   i = 5: r1 mod 6 = 2 (r1 >= 2^64 mod 6 = 4)  swap(5, 2): [1, 0, 0, 0, 0, 0]
//   i = 4: r2 mod 5 = 0 (r2 >= 1)               swap(4, 0): [0, 0, 0, 0, 1, 0]
//   i = 3: r3 mod 4 = 2                         swap(3, 2): unchanged
//   i = 2: r4 mod 3 = 2 (r4 >= 1)               j = i: unchanged
//   i = 1: r5 mod 2 = 0                         swap(1, 0): unchanged
//   -> item 5 starts segment 1 -> lengths [5, 2].
// Spans: non-noise 5 (t0..t4), noise 2 (t5 t6), non-noise 2 (t7 t8), noise 1 (t9):
//   input  = 200 201 202 203 204 <extra_id_0> 207 208 <extra_id_1>
//   target = <extra_id_0> 205 206 <extra_id_1> 209 <extra_id_2>
TEST(SpanCorruption, HandCheckedDrawsOnTenTokens) {
  SpanCorruptionOptions options;
  options.noise_density = 0.3;
  options.mean_noise_span_length = 1.5;
  std::mt19937_64 rng(42);
  const auto tokens = iota_tokens(10);
  const SpanCorruptionExample example = corrupt_spans(tokens, options, rng);
  EXPECT_EQ(example.input, (std::vector<int32_t>{200, 201, 202, 203, 204, 5, 207, 208, 6}));
  EXPECT_EQ(example.target, (std::vector<int32_t>{5, 205, 206, 6, 209, 7}));
  EXPECT_EQ(reconstruct(example, kFirstSentinel, kSentinels), tokens);
  std::mt19937_64 after(42);
  after.discard(6);  // exactly six draws were used
  EXPECT_TRUE(rng == after);
}

TEST(SpanCorruption, UniformBelowIsTheDocumentedRejectionDraw) {
  std::mt19937_64 rng(42);
  EXPECT_EQ(uniform_below(rng, 10), 6u);  // r0 mod 10, r0 >= 2^64 mod 10 = 6
  // bound 2^63 + 1: draws below 2^64 mod bound = 2^63 - 1 are rejected. r3 is, r4 is not.
  const uint64_t bound = (uint64_t{1} << 63) + 1;
  rng.seed(42);
  EXPECT_EQ(uniform_below(rng, bound), 13930160852258120406ull - bound);  // r0 accepted
  rng.seed(42);
  rng.discard(3);
  EXPECT_EQ(uniform_below(rng, bound), 7438999416573663572ull);  // r3 rejected, r4 - bound
  std::mt19937_64 after(42);
  after.discard(5);
  EXPECT_TRUE(rng == after);
  rng.seed(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(uniform_below(rng, 1), 0u);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 30000; ++i) ++counts[uniform_below(rng, 3)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);  // sd ~82
}

// Every composition of n into k parts is equally likely: C(n-1, k-1) of them. Chi-square against the uniform
// expectation with a generous bound (df + 6 sqrt(2 df), about six standard deviations; the seed is fixed).
TEST(SpanCorruption, RandomSegmentationIsUniformOverCompositions) {
  std::mt19937_64 rng(7);
  struct Case {
    int64_t n, k, compositions;
  };
  for (const Case& c : {Case{5, 2, 4}, Case{6, 3, 10}, Case{7, 4, 20}, Case{8, 3, 21}}) {
    const int draws = 2000 * static_cast<int>(c.compositions);
    std::map<std::vector<int64_t>, int> seen;
    for (int d = 0; d < draws; ++d) {
      const std::vector<int64_t> parts = random_segmentation(c.n, c.k, rng);
      ASSERT_EQ(static_cast<int64_t>(parts.size()), c.k);
      int64_t sum = 0;
      for (int64_t p : parts) {
        ASSERT_GE(p, 1);
        sum += p;
      }
      ASSERT_EQ(sum, c.n);
      ++seen[parts];
    }
    ASSERT_EQ(static_cast<int64_t>(seen.size()), c.compositions) << c.n << " into " << c.k;
    double chi2 = 0;
    for (const auto& [parts, count] : seen) chi2 += (count - 2000.0) * (count - 2000.0) / 2000.0;
    const double df = static_cast<double>(c.compositions - 1);
    EXPECT_LT(chi2, df + 6 * std::sqrt(2 * df)) << c.n << " into " << c.k;
  }
  // One composition only: nothing is drawn.
  std::mt19937_64 before = rng;
  EXPECT_EQ(random_segmentation(5, 1, rng), (std::vector<int64_t>{5}));
  EXPECT_EQ(random_segmentation(4, 4, rng), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(random_segmentation(1, 1, rng), (std::vector<int64_t>{1}));
  EXPECT_TRUE(rng == before);
}

TEST(SpanCorruption, NoiseMaskStartsCleanEndsNoisyAndHasTheCounts) {
  std::mt19937_64 rng(3);
  for (int64_t length = 2; length <= 300; ++length) {
    const std::vector<uint8_t> mask = random_spans_noise_mask(length, SpanCorruptionOptions(), rng);
    ASSERT_EQ(static_cast<int64_t>(mask.size()), length);
    EXPECT_EQ(mask.front(), 0);
    EXPECT_EQ(mask.back(), 1);
    int64_t noise = 0, spans = 0;
    for (size_t i = 0; i < mask.size(); ++i) {
      noise += mask[i];
      if (mask[i] && (i == 0 || !mask[i - 1])) ++spans;
    }
    const SpanCounts expected = expected_counts(length);
    EXPECT_EQ(noise, expected.noise_tokens) << length;
    EXPECT_EQ(spans, expected.noise_spans) << length;
  }
}

// 2,000 sequences of 100..512 random tokens (seed 42).
// The noise fraction and the mean span length are not random: n and s depend on L only. They are compared
// exactly with the formulas restated above, and with the tolerances of the objective:
// - |n / L - 0.15| <= 0.5 / L <= 0.005 for every L >= 100, and the total fraction is an L-weighted mean of those;
// - n - 3 s = 3 (n / 3 - s) where n / 3 - s is 0, +1/3 or -1/3 (about equally often over these lengths), so
//   sum n / sum s stays near 3; the worst case would be 1 / min s = 0.2, the measured value is far inside 0.15.
// What is random, the split into spans, is checked by the mean length of the first and last noise spans and of
// the first non-noise span, whose expectation is n / s and (L - n) / s per example (all parts of a uniform
// composition have the same mean); tolerances are about 5 standard errors.
TEST(SpanCorruption, StatisticsAndStructureOverManySequences) {
  std::mt19937_64 data_rng(42), rng(42);
  const SpanCorruptionOptions options;
  int64_t total_tokens = 0, total_noise = 0, total_spans = 0, expected_noise = 0, expected_spans = 0;
  double first_noise = 0, last_noise = 0, expected_noise_span = 0, first_clean = 0, expected_clean_span = 0;
  const int examples = 2000;
  for (int e = 0; e < examples; ++e) {
    const auto length = static_cast<int32_t>(100 + uniform_below(data_rng, 413));
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (auto& t : tokens) t = 105 + static_cast<int32_t>(uniform_below(data_rng, 29899));
    const SpanCorruptionExample example = corrupt_spans(tokens, options, rng);
    ASSERT_NO_FATAL_FAILURE(check_example(tokens, example)) << "example " << e;

    const SpanCounts expected = expected_counts(length);
    total_tokens += length;
    total_noise += example.noise_tokens;
    total_spans += example.noise_spans;
    expected_noise += expected.noise_tokens;
    expected_spans += expected.noise_spans;
    // First noise span: target tokens between <extra_id_0> and <extra_id_1>; last: before the closing one.
    size_t t = 1;
    while (!is_sentinel(example.target[t])) ++t;
    first_noise += static_cast<double>(t - 1);
    size_t u = example.target.size() - 2;
    while (!is_sentinel(example.target[u])) --u;
    last_noise += static_cast<double>(example.target.size() - 2 - u);
    size_t i = 0;
    while (!is_sentinel(example.input[i])) ++i;
    first_clean += static_cast<double>(i);
    expected_noise_span += static_cast<double>(expected.noise_tokens) / static_cast<double>(expected.noise_spans);
    expected_clean_span +=
        static_cast<double>(length - expected.noise_tokens) / static_cast<double>(expected.noise_spans);
  }
  EXPECT_EQ(total_noise, expected_noise);
  EXPECT_EQ(total_spans, expected_spans);
  const double fraction = static_cast<double>(total_noise) / static_cast<double>(total_tokens);
  const double mean_span = static_cast<double>(total_noise) / static_cast<double>(total_spans);
  EXPECT_NEAR(fraction, 0.15, 0.005);
  EXPECT_NEAR(mean_span, 3.0, 0.15);
  EXPECT_NEAR(first_noise / examples, expected_noise_span / examples, 0.3);
  EXPECT_NEAR(last_noise / examples, expected_noise_span / examples, 0.3);
  EXPECT_NEAR(first_clean / examples, expected_clean_span / examples, 2.0);
  std::cout << "noise fraction " << fraction << ", mean noise span " << mean_span << ", mean first noise span "
            << first_noise / examples << " (expected " << expected_noise_span / examples
            << "), mean first non-noise span " << first_clean / examples << " (expected "
            << expected_clean_span / examples << ")\n";
}

TEST(SpanCorruption, DeterministicForASeed) {
  const SpanCorruptionOptions options;
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<int32_t>> out;
    for (int32_t length = 2; length < 200; length += 7) {
      const SpanCorruptionExample example = corrupt_spans(iota_tokens(length), options, rng);
      out.push_back(example.input);
      out.push_back(example.target);
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(SpanCorruption, SentinelCapAndDegenerateCountsStillReconstruct) {
  std::mt19937_64 rng(5);
  SpanCorruptionOptions few;
  few.num_sentinels = 4;  // round(30 / 3) = 10 spans wanted, 3 allowed (+ the closing sentinel)
  const auto tokens = iota_tokens(200);
  const SpanCorruptionExample capped = corrupt_spans(tokens, few, rng);
  EXPECT_EQ(capped.noise_tokens, 30);
  EXPECT_EQ(capped.noise_spans, 3);
  EXPECT_EQ(capped.target.back(), kFirstSentinel + 3);
  EXPECT_EQ(reconstruct(capped, kFirstSentinel, 4), tokens);

  SpanCorruptionOptions dense;
  dense.noise_density = 0.9;
  dense.mean_noise_span_length = 1;
  const SpanCorruptionExample one = corrupt_spans(iota_tokens(10), dense, rng);
  EXPECT_EQ(one.input, (std::vector<int32_t>{200, 5}));
  EXPECT_EQ(one.target, (std::vector<int32_t>{5, 201, 202, 203, 204, 205, 206, 207, 208, 209, 6}));

  const SpanCorruptionExample two = corrupt_spans({200, 201}, SpanCorruptionOptions(), rng);
  EXPECT_EQ(two.input, (std::vector<int32_t>{200, 5}));
  EXPECT_EQ(two.target, (std::vector<int32_t>{5, 201, 6}));

  // Another sentinel range (first id 1000, 10 sentinels) over tokens 0..59, which
  // include ids that are sentinels in the default range.
  SpanCorruptionOptions other;
  other.first_sentinel_id = 1000;
  other.num_sentinels = 10;
  const auto low = iota_tokens(60, 0);
  const SpanCorruptionExample shifted = corrupt_spans(low, other, rng);
  EXPECT_EQ(shifted.input.back(), 1000 + shifted.noise_spans - 1);
  EXPECT_EQ(reconstruct(shifted, 1000, 10), low);
}

TEST(SpanCorruption, ApplyNoiseMaskTakesAnyMask) {
  const SpanCorruptionOptions options;
  const auto tokens = iota_tokens(6);
  const SpanCorruptionExample example = apply_noise_mask(tokens, {1, 1, 0, 1, 0, 0}, options);
  EXPECT_EQ(example.input, (std::vector<int32_t>{5, 202, 6, 204, 205}));
  EXPECT_EQ(example.target, (std::vector<int32_t>{5, 200, 201, 6, 203, 7}));
  EXPECT_EQ(example.noise_tokens, 3);
  EXPECT_EQ(example.noise_spans, 2);
  EXPECT_EQ(reconstruct(example, kFirstSentinel, kSentinels), tokens);
  const SpanCorruptionExample clean = apply_noise_mask(tokens, std::vector<uint8_t>(6, 0), options);
  EXPECT_EQ(clean.input, tokens);
  EXPECT_EQ(clean.target, (std::vector<int32_t>{5}));
  EXPECT_EQ(reconstruct(clean, kFirstSentinel, kSentinels), tokens);
}

TEST(SpanCorruption, BadOptionsAndInputsSayWhatWasExpected) {
  std::mt19937_64 rng(1);
  const auto tokens = iota_tokens(20);
  auto with = [](auto change) {
    SpanCorruptionOptions options;
    change(options);
    return options;
  };
  auto corrupt = [&](const SpanCorruptionOptions& options) {
    return usage_message([&] { corrupt_spans(tokens, options, rng); });
  };
  EXPECT_EQ(corrupt(with([](auto& o) { o.noise_density = 0; })), "--noise-density: expected a value in (0, 1), got 0");
  EXPECT_EQ(corrupt(with([](auto& o) { o.noise_density = 1; })), "--noise-density: expected a value in (0, 1), got 1");
  EXPECT_EQ(corrupt(with([](auto& o) { o.noise_density = 1.5; })),
            "--noise-density: expected a value in (0, 1), got 1.5");
  EXPECT_EQ(corrupt(with([](auto& o) { o.noise_density = std::numeric_limits<double>::quiet_NaN(); })),
            "--noise-density: expected a value in (0, 1), got nan");
  EXPECT_EQ(corrupt(with([](auto& o) { o.mean_noise_span_length = 0; })),
            "--mean-noise-span-length: expected a finite value > 0, got 0");
  EXPECT_EQ(corrupt(with([](auto& o) { o.mean_noise_span_length = -2.5; })),
            "--mean-noise-span-length: expected a finite value > 0, got -2.5");
  EXPECT_EQ(corrupt(with([](auto& o) { o.num_sentinels = 1; })),
            "span corruption: expected at least 2 sentinels (one per noise span and one closing the target), "
            "got 1");
  EXPECT_EQ(corrupt(with([](auto& o) { o.first_sentinel_id = -1; })),
            "span corruption: expected a first sentinel id >= 0, got -1");
  EXPECT_EQ(usage_message([&] { corrupt_spans({}, SpanCorruptionOptions(), rng); }),
            "span corruption: expected at least 2 tokens, got 0");
  EXPECT_EQ(usage_message([&] { corrupt_spans({300}, SpanCorruptionOptions(), rng); }),
            "span corruption: expected at least 2 tokens, got 1");
  EXPECT_EQ(usage_message([&] { random_segmentation(2, 3, rng); }),
            "random segmentation: expected 1 <= segments <= items, got 3 segments of 2 items");
  EXPECT_EQ(usage_message([&] {
              apply_noise_mask(tokens, {1, 0}, SpanCorruptionOptions());
            }),
            "span corruption: expected a noise mask of 20 entries (one per token), got 2");
  EXPECT_EQ(usage_message([&] {
              apply_noise_mask({200, 201, 202, 203}, {1, 0, 1, 0}, with([](auto& o) { o.num_sentinels = 2; }));
            }),
            "span corruption: expected at most 1 noise spans (2 sentinels, the last one closes the target), got 2");
  EXPECT_EQ(usage_message([&] { span_corruption_lengths(2, SpanCorruptionOptions()); }),
            "span corruption: expected a maximum input length of at least 3 (2 tokens, one sentinel, 1 extra), "
            "got 2");
  EXPECT_EQ(usage_message([&] { split_into_chunks(tokens, 1); }),
            "span corruption: expected a chunk length of at least 2, got 1");
  EXPECT_EQ(data_message([&] {
              corrupt_spans({200, 7, 201}, SpanCorruptionOptions(), rng);
            }),
            "span corruption: expected no sentinel ids among the tokens, got <extra_id_2> (id 7) at position 1");
}

TEST(SpanCorruption, ReconstructRefusesMalformedExamples) {
  SpanCorruptionExample good;
  good.input = {200, 5, 203, 6};
  good.target = {5, 201, 202, 6, 204, 7};
  good.noise_tokens = 3;
  good.noise_spans = 2;
  ASSERT_EQ(reconstruct(good, kFirstSentinel, kSentinels), (std::vector<int32_t>{200, 201, 202, 203, 204}));
  auto broken = [&](auto change) {
    SpanCorruptionExample example = good;
    change(example);
    return data_message([&] { reconstruct(example, kFirstSentinel, kSentinels); });
  };
  EXPECT_EQ(broken([](auto& e) { e.target = {}; }),
            "span corruption: expected the target to start with <extra_id_0>, got an empty target");
  EXPECT_EQ(broken([](auto& e) { e.target[0] = 201; }),
            "span corruption: expected the target to start with <extra_id_0>, got id 201");
  EXPECT_EQ(broken([](auto& e) { e.target[3] = 7; }),
            "span corruption: expected <extra_id_1> at target position 3, got <extra_id_2>");
  EXPECT_EQ(broken([](auto& e) { e.target.pop_back(); }),
            "span corruption: expected the target to end with its closing sentinel <extra_id_2>, got 2 sentinels, "
            "the last at position 3 of 5");
  EXPECT_EQ(broken([](auto& e) { e.target.push_back(8); }),
            "span corruption: expected no sentinel after the closing one at target position 6, got <extra_id_3>");
  EXPECT_EQ(broken([](auto& e) { e.noise_tokens = 4; }),
            "span corruption: expected 4 noise tokens in the target, got 3");
  EXPECT_EQ(broken([](auto& e) {
              e.input = {200, 6, 203, 5};
            }),
            "span corruption: expected <extra_id_0> at input position 1, got <extra_id_1>");
  EXPECT_EQ(broken([](auto& e) {
              e.input = {200, 5, 203};
            }),
            "span corruption: expected 2 sentinels in the input, got 1");
  EXPECT_EQ(broken([](auto& e) {
              e.input = {200, 5, 203, 6, 7};
            }),
            "span corruption: expected no more sentinels at input position 4, got <extra_id_2>");
  EXPECT_EQ(broken([](auto& e) { e.noise_spans = 100; }),
            "span corruption: expected between 0 and 99 noise spans, got 100");
}

// Expected values from a small Python re-implementation of the formula of T5's random_spans_helper that I
// wrote for this test (Python floats and round(); n = round(L d), s = round(n / mean); inputs
// L - n + s + 1, targets n + s + 1; the largest L whose inputs fit, searched upwards from inputs_length - 1):
//   (512, 0.15, 3) -> (568, 114)   (T5's published setting: 568 raw tokens, 114-token targets)
//   (128, 0.15, 3) -> (141, 29)    (256, 0.15, 3) -> (284, 58)    (1024, 0.15, 3) -> (1137, 229)
//   (64, 0.15, 3)  -> (70, 14)     (16, 0.15, 3)  -> (17, 5)      (512, 0.3, 8)   -> (693, 235)
// cabert's targets carry the closing sentinel, so with one extra (EOS) token they are one longer; with no
// extra token the closing sentinel takes the EOS's place and the targets equal T5's.
TEST(SpanCorruption, LengthHelperMatchesT5) {
  struct Case {
    int64_t inputs;
    double density, mean;
    int64_t t5_tokens, t5_targets;
  };
  for (const Case& c : {Case{512, 0.15, 3, 568, 114}, Case{128, 0.15, 3, 141, 29}, Case{256, 0.15, 3, 284, 58},
                        Case{1024, 0.15, 3, 1137, 229}, Case{64, 0.15, 3, 70, 14}, Case{16, 0.15, 3, 17, 5},
                        Case{512, 0.3, 8, 693, 235}}) {
    SpanCorruptionOptions options;
    options.noise_density = c.density;
    options.mean_noise_span_length = c.mean;
    const SpanCorruptionLengths with_eos = span_corruption_lengths(c.inputs, options, 1);
    EXPECT_EQ(with_eos.tokens_length, c.t5_tokens) << c.inputs;
    EXPECT_EQ(with_eos.inputs_length, c.inputs) << c.inputs;
    EXPECT_EQ(with_eos.targets_length, c.t5_targets + 1) << c.inputs;
    const SpanCorruptionLengths without = span_corruption_lengths(c.inputs - 1, options, 0);
    EXPECT_EQ(without.tokens_length, c.t5_tokens) << c.inputs;
    EXPECT_EQ(without.targets_length, c.t5_targets) << c.inputs;
  }
}

// A stream split into chunks of tokens_length: every example, the short last one included, fits the bounds.
TEST(SpanCorruption, ChunksFitTheComputedLengths) {
  const SpanCorruptionOptions options;
  const SpanCorruptionLengths lengths = span_corruption_lengths(128, options);
  ASSERT_EQ(lengths.tokens_length, 141);
  std::mt19937_64 rng(11);
  for (int64_t length = 2; length <= lengths.tokens_length; ++length) {
    const auto tokens = iota_tokens(static_cast<int32_t>(length));
    const SpanCorruptionExample example = corrupt_spans(tokens, options, rng);
    EXPECT_LE(static_cast<int64_t>(example.input.size()) + 1, lengths.inputs_length) << length;
    EXPECT_LE(static_cast<int64_t>(example.target.size()) + 1, lengths.targets_length) << length;
  }
  const auto stream = iota_tokens(1000);
  const auto chunks = split_into_chunks(stream, lengths.tokens_length);
  ASSERT_EQ(chunks.size(), 8u);  // 7 x 141 + 13
  EXPECT_EQ(chunks.back().size(), 13u);
  std::vector<int32_t> joined;
  for (const auto& chunk : chunks) joined.insert(joined.end(), chunk.begin(), chunk.end());
  EXPECT_EQ(joined, stream);

  EXPECT_EQ(split_into_chunks(iota_tokens(10), 4).size(), 3u);  // 4 + 4 + 2
  EXPECT_EQ(split_into_chunks(iota_tokens(9), 4).size(), 2u);   // 4 + 4, a 1-token rest dropped
  EXPECT_TRUE(split_into_chunks(iota_tokens(1), 4).empty());
  EXPECT_TRUE(split_into_chunks({}, 4).empty());
}

}  // namespace
}  // namespace cabert::data
