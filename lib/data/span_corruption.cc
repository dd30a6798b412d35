#include "lib/data/span_corruption.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "lib/core/errors.h"

namespace cabert::data {
namespace {

// Python's round(): half to even. x >= 0 here, and x - floor(x) is exact for doubles.
int64_t round_half_even(double x) {
  const double floor = std::floor(x);
  const double fraction = x - floor;
  auto whole = static_cast<int64_t>(floor);
  if (fraction > 0.5 || (fraction == 0.5 && whole % 2 != 0)) ++whole;
  return whole;
}

std::string sentinel_name(int64_t index) { return str("<extra_id_", index, ">"); }

// Index k of <extra_id_k>, or -1 for an ordinary token.
int64_t sentinel_index(int32_t id, int32_t first_sentinel_id, int32_t num_sentinels) {
  const int64_t k = static_cast<int64_t>(id) - first_sentinel_id;
  return k >= 0 && k < num_sentinels ? k : -1;
}

void check_length(int64_t length) {
  if (length < 2) throw UsageError(str("span corruption: expected at least 2 tokens, got ", length));
  if (length > std::numeric_limits<int32_t>::max()) {
    throw UsageError(
        str("span corruption: expected at most ", std::numeric_limits<int32_t>::max(), " tokens, got ", length));
  }
}

}  // namespace

void check_options(const SpanCorruptionOptions& options) {
  // Written as !(ok) so that NaN fails too.
  if (!(options.noise_density > 0 && options.noise_density < 1)) {
    throw UsageError(str("--noise-density: expected a value in (0, 1), got ", options.noise_density));
  }
  if (!(options.mean_noise_span_length > 0) || std::isinf(options.mean_noise_span_length)) {
    throw UsageError(
        str("--mean-noise-span-length: expected a finite value > 0, got ", options.mean_noise_span_length));
  }
  if (options.first_sentinel_id < 0) {
    throw UsageError(str("span corruption: expected a first sentinel id >= 0, got ", options.first_sentinel_id));
  }
  if (options.num_sentinels < 2) {
    throw UsageError(str("span corruption: expected at least 2 sentinels (one per noise span and one closing "
                         "the target), got ",
                         options.num_sentinels));
  }
}

SpanCounts span_counts(int64_t length, const SpanCorruptionOptions& options) {
  check_options(options);
  check_length(length);
  SpanCounts counts;
  counts.noise_tokens =
      std::clamp<int64_t>(round_half_even(static_cast<double>(length) * options.noise_density), 1, length - 1);
  int64_t spans =
      std::max<int64_t>(1, round_half_even(static_cast<double>(counts.noise_tokens) / options.mean_noise_span_length));
  spans = std::min(
      {spans, counts.noise_tokens, length - counts.noise_tokens, static_cast<int64_t>(options.num_sentinels) - 1});
  counts.noise_spans = spans;
  return counts;
}

uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  if (bound == 0) throw UsageError("uniform_below: expected a bound >= 1, got 0");
  const uint64_t reject_below = (0 - bound) % bound;  // (2^64 - bound) mod bound = 2^64 mod bound
  for (;;) {
    const uint64_t draw = rng();
    if (draw >= reject_below) return draw % bound;
  }
}

std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments, std::mt19937_64& rng) {
  if (num_segments < 1 || num_segments > num_items) {
    throw UsageError(str("random segmentation: expected 1 <= segments <= items, got ", num_segments, " segments of ",
                         num_items, " items"));
  }
  // starts[g] = 1: item g + 1 begins a new segment (item 0 always begins the first).
  std::vector<uint8_t> starts(static_cast<size_t>(num_items - 1), 0);
  std::fill(starts.begin(), starts.begin() + (num_segments - 1), 1);
  if (num_segments > 1 && num_segments < num_items) fisher_yates_shuffle(starts, rng);
  std::vector<int64_t> lengths(static_cast<size_t>(num_segments), 0);
  size_t segment = 0;
  lengths[0] = 1;
  for (uint8_t start : starts) {
    if (start) ++segment;
    ++lengths[segment];
  }
  return lengths;
}

std::vector<uint8_t> random_spans_noise_mask(int64_t length, const SpanCorruptionOptions& options,
                                             std::mt19937_64& rng) {
  const SpanCounts counts = span_counts(length, options);
  const std::vector<int64_t> noise = random_segmentation(counts.noise_tokens, counts.noise_spans, rng);
  const std::vector<int64_t> other = random_segmentation(length - counts.noise_tokens, counts.noise_spans, rng);
  std::vector<uint8_t> mask;
  mask.reserve(static_cast<size_t>(length));
  for (size_t i = 0; i < noise.size(); ++i) {
    mask.insert(mask.end(), static_cast<size_t>(other[i]), 0);
    mask.insert(mask.end(), static_cast<size_t>(noise[i]), 1);
  }
  return mask;
}

SpanCorruptionExample apply_noise_mask(const std::vector<int32_t>& tokens, const std::vector<uint8_t>& mask,
                                       const SpanCorruptionOptions& options) {
  check_options(options);
  if (mask.size() != tokens.size()) {
    throw UsageError(str("span corruption: expected a noise mask of ", tokens.size(), " entries (one per token), got ",
                         mask.size()));
  }
  check_length(static_cast<int64_t>(tokens.size()));
  int64_t spans = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t k = sentinel_index(tokens[i], options.first_sentinel_id, options.num_sentinels);
    if (k >= 0) {
      throw DataError(str("span corruption: expected no sentinel ids among the tokens, got ", sentinel_name(k), " (id ",
                          tokens[i], ") at position ", i));
    }
    if (mask[i] && (i == 0 || !mask[i - 1])) ++spans;
  }
  if (spans > options.num_sentinels - 1) {
    throw UsageError(str("span corruption: expected at most ", options.num_sentinels - 1, " noise spans (",
                         options.num_sentinels, " sentinels, the last one closes the target), got ", spans));
  }

  SpanCorruptionExample example;
  example.noise_spans = static_cast<int32_t>(spans);
  int32_t next_sentinel = options.first_sentinel_id;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!mask[i]) {
      example.input.push_back(tokens[i]);
      continue;
    }
    if (i == 0 || !mask[i - 1]) {
      example.input.push_back(next_sentinel);
      example.target.push_back(next_sentinel);
      ++next_sentinel;
    }
    example.target.push_back(tokens[i]);
    ++example.noise_tokens;
  }
  example.target.push_back(next_sentinel);
  return example;
}

SpanCorruptionExample corrupt_spans(const std::vector<int32_t>& tokens, const SpanCorruptionOptions& options,
                                    std::mt19937_64& rng) {
  check_options(options);
  check_length(static_cast<int64_t>(tokens.size()));
  return apply_noise_mask(tokens, random_spans_noise_mask(static_cast<int64_t>(tokens.size()), options, rng), options);
}

std::vector<int32_t> reconstruct(const SpanCorruptionExample& example, int32_t first_sentinel_id,
                                 int32_t num_sentinels) {
  const int64_t spans = example.noise_spans;
  if (spans < 0 || spans > static_cast<int64_t>(num_sentinels) - 1) {
    throw DataError(str("span corruption: expected between 0 and ", static_cast<int64_t>(num_sentinels) - 1,
                        " noise spans, got ", spans));
  }
  const auto& target = example.target;
  if (target.empty() || sentinel_index(target[0], first_sentinel_id, num_sentinels) != 0) {
    throw DataError(str("span corruption: expected the target to start with <extra_id_0>, got ",
                        target.empty() ? std::string("an empty target") : str("id ", target[0])));
  }
  // Where <extra_id_k> sits in the target, k = 0..spans (the last one closes it).
  std::vector<size_t> sentinel_at;
  for (size_t t = 0; t < target.size(); ++t) {
    const int64_t k = sentinel_index(target[t], first_sentinel_id, num_sentinels);
    if (k < 0) continue;
    const auto expected = static_cast<int64_t>(sentinel_at.size());
    if (k != expected || expected > spans) {
      throw DataError(str("span corruption: expected ",
                          expected > spans ? std::string("no sentinel after the closing one") : sentinel_name(expected),
                          " at target position ", t, ", got ", sentinel_name(k)));
    }
    sentinel_at.push_back(t);
  }
  if (static_cast<int64_t>(sentinel_at.size()) != spans + 1 || sentinel_at.back() != target.size() - 1) {
    throw DataError(str("span corruption: expected the target to end with its closing sentinel ", sentinel_name(spans),
                        ", got ", sentinel_at.size(), " sentinels, the last at position ", sentinel_at.back(), " of ",
                        target.size()));
  }
  const auto noise_tokens = static_cast<int64_t>(target.size()) - (spans + 1);
  if (noise_tokens != example.noise_tokens) {
    throw DataError(
        str("span corruption: expected ", example.noise_tokens, " noise tokens in the target, got ", noise_tokens));
  }

  std::vector<int32_t> tokens;
  tokens.reserve(example.input.size() + target.size());
  int64_t next = 0;
  for (size_t i = 0; i < example.input.size(); ++i) {
    const int32_t id = example.input[i];
    const int64_t k = sentinel_index(id, first_sentinel_id, num_sentinels);
    if (k < 0) {
      tokens.push_back(id);
      continue;
    }
    if (k != next || k >= spans) {
      throw DataError(str("span corruption: expected ",
                          next >= spans ? std::string("no more sentinels") : sentinel_name(next), " at input position ",
                          i, ", got ", sentinel_name(k)));
    }
    const size_t k_at = sentinel_at[static_cast<size_t>(k)];
    tokens.insert(tokens.end(), target.begin() + static_cast<std::ptrdiff_t>(k_at + 1),
                  target.begin() + static_cast<std::ptrdiff_t>(sentinel_at[static_cast<size_t>(k) + 1]));
    ++next;
  }
  if (next != spans) {
    throw DataError(str("span corruption: expected ", spans, " sentinels in the input, got ", next));
  }
  return tokens;
}

SpanCorruptionLengths span_corruption_lengths(int64_t max_inputs_length, const SpanCorruptionOptions& options,
                                              int64_t extra_tokens) {
  check_options(options);
  if (extra_tokens < 0) {
    throw UsageError(str("span corruption: expected extra tokens >= 0, got ", extra_tokens));
  }
  auto lengths_of = [&](int64_t length) {
    const SpanCounts c = span_counts(length, options);
    return std::make_pair(length - c.noise_tokens + c.noise_spans + extra_tokens,
                          c.noise_tokens + c.noise_spans + 1 + extra_tokens);
  };
  SpanCorruptionLengths out;
  out.tokens_length = 2;
  std::tie(out.inputs_length, out.targets_length) = lengths_of(2);
  if (out.inputs_length > max_inputs_length) {
    throw UsageError(str("span corruption: expected a maximum input length of at least ", out.inputs_length,
                         " (2 tokens, one sentinel, ", extra_tokens, " extra), got ", max_inputs_length));
  }
  // The input length grows without bound (by at least L x (1 - density) - 1), so this ends.
  for (;;) {
    const auto [inputs, targets] = lengths_of(out.tokens_length + 1);
    if (inputs > max_inputs_length) break;
    ++out.tokens_length;
    out.inputs_length = std::max(out.inputs_length, inputs);
    out.targets_length = std::max(out.targets_length, targets);
  }
  return out;
}

std::vector<std::vector<int32_t>> split_into_chunks(const std::vector<int32_t>& tokens, int64_t chunk_length) {
  if (chunk_length < 2) {
    throw UsageError(str("span corruption: expected a chunk length of at least 2, got ", chunk_length));
  }
  std::vector<std::vector<int32_t>> chunks;
  const auto step = static_cast<size_t>(chunk_length);
  for (size_t begin = 0; begin + 2 <= tokens.size(); begin += step) {
    const size_t end = std::min(tokens.size(), begin + step);
    chunks.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                        tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return chunks;
}

}  // namespace cabert::data
