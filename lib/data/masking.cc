#include "lib/data/masking.h"

#include "lib/core/random.h"

namespace cabert::data {

MaskedBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& mask, const MaskingOptions& options,
                        std::mt19937_64& rng) {
  RowRandom rows(rng);
  return mask_tokens(ids, mask, options, rows);
}

MaskedBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& mask, const MaskingOptions& options,
                        RowRandom& rows) {
  const int64_t B = ids.size(0), T = ids.size(1);
  MaskedBatch out;
  out.input_ids = ids.clone();
  out.positions = torch::zeros({B, T}, torch::kBool);
  auto input = out.input_ids.accessor<int64_t, 2>();
  auto positions = out.positions.accessor<bool, 2>();
  auto real = mask.accessor<bool, 2>();
  const int64_t regular = options.vocab_size - options.first_regular_id;
  std::vector<int64_t> labels;
  for (int64_t b = 0; b < B; ++b) {
    std::mt19937_64& rng = rows.row(b);
    std::vector<int64_t> candidates;
    int64_t length = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (!real[b][t]) continue;
      ++length;
      if (input[b][t] >= options.first_regular_id) candidates.push_back(t);
    }
    if (candidates.empty()) continue;
    std::vector<int64_t> chosen;
    for (int64_t t : candidates) {
      if (uniform01(rng) < options.select) chosen.push_back(t);
    }
    if (chosen.empty()) chosen.push_back(candidates[rng() % candidates.size()]);
    if (options.max_fraction > 0) {
      const size_t cap = std::max<size_t>(1, static_cast<size_t>(options.max_fraction * length));
      while (chosen.size() > cap) chosen.erase(chosen.begin() + static_cast<int64_t>(rng() % chosen.size()));
    }
    for (int64_t t : chosen) positions[b][t] = true;
    for (int64_t t = 0; t < T; ++t) {
      if (!positions[b][t]) continue;
      labels.push_back(input[b][t]);
      const double u = uniform01(rng);
      if (u < options.mask_token) {
        input[b][t] = options.mask_id;
      } else if (u < options.mask_token + options.random_token && regular > 0) {
        input[b][t] = options.first_regular_id + static_cast<int64_t>(rng() % static_cast<uint64_t>(regular));
      }
    }
  }
  out.labels = torch::tensor(labels, torch::kInt64);
  return out;
}
}  // namespace cabert::data
