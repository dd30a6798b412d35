// Sinusoidal position encodings (Vaswani et al. 2017, section 3.5) in fairseq's layout, the default of its
// lightconv and transformer models (fairseq/modules/sinusoidal_positional_embedding.py): for a position p and
// an even width d, half = d/2 and w_i = exp(-i log(10000) / (half - 1)),
//   enc(p) = [sin(p w_0), ..., sin(p w_{half-1}), cos(p w_0), ..., cos(p w_{half-1})]   (not interleaved),
// a zero column appended when d is odd. Real tokens are numbered from `first_position` in order; padding gets
// zeros. fairseq numbers from padding_idx + 1 = 2 (its [PAD] is 1); cabert's [PAD] is 0, so from 1.
// Computed on the fly: any length, nothing to learn or store.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::models {

// positions int64 [N, T] (any value >= 0) -> [N, T, dim] in `dtype`.
torch::Tensor sinusoidal_encoding(const torch::Tensor& positions, int64_t dim, torch::ScalarType dtype);

// The positions of real tokens: mask bool [N, T] (true = real, padding on the right or anywhere) ->
// first_position, first_position + 1, ... for real tokens; the encoding of padding is zero.
torch::Tensor sinusoidal_positions(const torch::Tensor& mask, int64_t dim, torch::ScalarType dtype,
                                   int64_t first_position = 1);

}  // namespace cabert::models
