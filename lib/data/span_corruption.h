// T5 span corruption (Raffel et al. 2020, section 3.1.4; the pre-training objective of Tay et al. 2021) over
// plain token ids, with no tensor dependency. For a sequence of L tokens:
//   noise tokens n = round(L x density), clamped to [1, L - 1];
//   noise spans  s = max(1, round(n / mean span length)), then capped (see below);
//   the n noise tokens and the L - n other tokens are each split into s non-empty spans, every split equally
//   likely; the spans alternate non-noise, noise, non-noise, ... starting with non-noise (so the last span is
//   noise, as in T5's random_spans_noise_mask without random_roll);
//   input  = the tokens with noise span i replaced by <extra_id_i>;
//   target = <extra_id_0> span0 <extra_id_1> span1 ... <extra_id_{s-1}> span{s-1} <extra_id_s>.
//
// Choices, and where they differ from T5's code (t5/data/preprocessors.py):
// - Every token given is eligible: like T5, which noises all tokens of plain text, the caller passes a plain
//   token stream (no [CLS]/[SEP] framing). Tokens that are themselves sentinels are refused (DataError):
//   reconstruction would be ambiguous.
// - The target ends with a closing sentinel <extra_id_s>, as SPEC.md section 6 and the paper's Figure 2 show.
//   T5's code has none (its targets end with the last noise span, then EOS). So s noise spans use s + 1
//   sentinels.
// - Caps on s, which T5 does not apply: s <= n and s <= L - n (T5 would build an impossible segmentation
//   when the mean span length is below 1 or the density is high) and s <= num_sentinels - 1 (T5 would run
//   past its 100 sentinels into ordinary vocabulary ids). With the defaults the sentinel cap binds only from
//   L = 1,991 tokens on; past it the spans simply get longer on average while n stays round(L x density).
// - No EOS is added here. T5 appends EOS to inputs and targets in a later step; whoever batches does that,
//   and span_corruption_lengths() counts those extra tokens.
// - round() is round-half-to-even on doubles, as Python's round() in T5's random_spans_helper (T5's mask
//   uses float32 tf.round, also half-to-even; the two can differ only at float32 ties).
// - Randomness: only raw 64-bit outputs of std::mt19937_64 (whose sequence the C++ standard fixes), so a
//   seed, or a checkpointed engine state, gives the same examples with every standard library.
//   std::shuffle and std::uniform_int_distribution are implementation-defined and are not used.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace cabert::data {

struct SpanCorruptionOptions {
  double noise_density = 0.15;
  double mean_noise_span_length = 3.0;
  int32_t first_sentinel_id = 5;  // <extra_id_k> = first_sentinel_id + k (text::SpecialTokens::kFirstSentinel)
  int32_t num_sentinels = 100;    // the tokenizer's sentinels; s noise spans need s + 1 of them
};

// UsageError "expected X, got Y" unless density is in (0, 1), the mean span length > 0, the first sentinel id
// >= 0 and there are at least 2 sentinels.
void check_options(const SpanCorruptionOptions& options);

struct SpanCounts {
  int64_t noise_tokens = 0;
  int64_t noise_spans = 0;
};

// n and s (after the caps above) for a sequence of `length` >= 2 tokens; deterministic.
SpanCounts span_counts(int64_t length, const SpanCorruptionOptions& options);

// Uniform integer in [0, bound), bound >= 1, unbiased: raw draws below 2^64 mod bound are rejected (so the
// accepted range is a whole number of copies of [0, bound)), then the draw is reduced mod bound. A rejection
// has probability below bound / 2^64.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound);

// Fisher-Yates: for i = size-1 down to 1, swap item i with item uniform_below(i + 1).
template <typename T>
void fisher_yates_shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (size_t i = items.size(); i-- > 1;) {
    const size_t j = static_cast<size_t>(uniform_below(rng, i + 1));
    if (j != i) std::swap(items[i], items[j]);
  }
}

// Splits num_items into num_segments positive lengths summing to num_items, every composition equally likely
// (T5's _random_segmentation): shuffles num_segments - 1 "a segment starts here" marks among the
// num_items - 1 gaps between items. When every gap gets a mark, or none, nothing is drawn.
std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments, std::mt19937_64& rng);

// T5's random_spans_noise_mask: 1 for noise tokens. Draws the noise segmentation, then the non-noise one.
std::vector<uint8_t> random_spans_noise_mask(int64_t length, const SpanCorruptionOptions& options,
                                             std::mt19937_64& rng);

struct SpanCorruptionExample {
  std::vector<int32_t> input, target;
  int32_t noise_tokens = 0;
  int32_t noise_spans = 0;
};

// Builds input and target from any mask (each maximal run of noise is one span): T5's
// noise_span_to_unique_sentinel for the input, and the sentinel-delimited noise spans for the target.
SpanCorruptionExample apply_noise_mask(const std::vector<int32_t>& tokens, const std::vector<uint8_t>& mask,
                                       const SpanCorruptionOptions& options);

// random_spans_noise_mask + apply_noise_mask. UsageError for bad options or fewer than 2 tokens.
SpanCorruptionExample corrupt_spans(const std::vector<int32_t>& tokens, const SpanCorruptionOptions& options,
                                    std::mt19937_64& rng);

// The original tokens, exactly; DataError ("expected X, got Y") when the example is malformed (sentinels
// missing or out of order, counts that do not match).
std::vector<int32_t> reconstruct(const SpanCorruptionExample& example, int32_t first_sentinel_id,
                                 int32_t num_sentinels);

struct SpanCorruptionLengths {
  int64_t tokens_length = 0;   // raw tokens per chunk
  int64_t inputs_length = 0;   // longest input of a chunk of at most tokens_length tokens, extra tokens included
  int64_t targets_length = 0;  // longest target of such a chunk, closing sentinel and extra tokens included
};

// T5's random_spans_helper: the largest raw length L whose input, plus `extra_tokens` (T5: 1 EOS), fits in
// max_inputs_length, and the target length that then bounds every target. Inputs are (L - n) + s + extra,
// targets n + s + 1 + extra (the closing sentinel), maximised over all lengths up to L so that the shorter
// last chunk of a stream is bounded too. With extra_tokens = 1 and no cap binding, tokens_length equals
// T5's and targets_length is T5's plus one (the closing sentinel). T5's special case for density 0.5 (one
// token less so that targets do not exceed inputs) is not reproduced.
SpanCorruptionLengths span_corruption_lengths(int64_t max_inputs_length, const SpanCorruptionOptions& options,
                                              int64_t extra_tokens = 1);

// Consecutive chunks of chunk_length tokens (T5's split_tokens with a fixed length); the last chunk is
// shorter, and dropped when it has fewer than 2 tokens (nothing to corrupt).
std::vector<std::vector<int32_t>> split_into_chunks(const std::vector<int32_t>& tokens, int64_t chunk_length);

}  // namespace cabert::data
