// Masking for the encoder pre-training objectives: BERT's MLM (select 15% of the regular tokens, 80% [MASK] /
// 10% random / 10% kept) and ELECTRA's generator input (85% [MASK] / 15% kept, at most a fraction of the
// length), drawn from a seeded std RNG so that a resumed run draws the same masks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>

#include "lib/core/random.h"

namespace cabert::data {

struct MaskingOptions {
  double select = 0.15;       // probability a regular token is selected
  double mask_token = 0.8;    // selected -> [MASK]
  double random_token = 0.1;  // selected -> random regular token (rest: kept)
  double max_fraction = 0;    // > 0: at most int(max_fraction * length) selections per sequence
  int64_t vocab_size = 0;
  int64_t first_regular_id = 5;  // ids below are special ([PAD] [UNK] [CLS] [SEP] [MASK] sentinels)
  int64_t mask_id = 4;
};

struct MaskedBatch {
  torch::Tensor input_ids;  // [B, T] after replacement
  torch::Tensor positions;  // bool [B, T]: selected tokens
  torch::Tensor labels;     // int64 [M]: original ids at the selected positions (row-major)
};

// Selects among real, non-special tokens (at least one per sequence that has any), then replaces; row by
// row, each drawing from rows.row(b).
MaskedBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& mask, const MaskingOptions& options,
                        RowRandom& rows);
// Every row draws from `rng`.
MaskedBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& mask, const MaskingOptions& options,
                        std::mt19937_64& rng);

}  // namespace cabert::data
