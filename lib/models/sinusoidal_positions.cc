#include "lib/models/sinusoidal_positions.h"

#include <cmath>

#include "lib/core/errors.h"

namespace cabert::models {

torch::Tensor sinusoidal_encoding(const torch::Tensor& positions, int64_t dim, torch::ScalarType dtype) {
  const int64_t half = dim / 2;
  if (half < 2) throw UsageError(str("sinusoidal positions: expected a width of at least 4, got ", dim));
  auto options = positions.options().dtype(torch::kDouble);
  // Frequencies in double, as fairseq builds its table in float from the same formula.
  torch::Tensor frequencies = torch::exp(torch::arange(half, options) * (-std::log(10000.0) / (half - 1)));
  torch::Tensor angles = positions.to(torch::kDouble).unsqueeze(-1) * frequencies;
  torch::Tensor encoding = torch::cat({torch::sin(angles), torch::cos(angles)}, -1);
  if (dim % 2 == 1) encoding = torch::cat({encoding, torch::zeros_like(encoding.narrow(-1, 0, 1))}, -1);
  return encoding.to(dtype);
}

torch::Tensor sinusoidal_positions(const torch::Tensor& mask, int64_t dim, torch::ScalarType dtype,
                                   int64_t first_position) {
  torch::Tensor real = mask.to(torch::kInt64);
  torch::Tensor positions = (torch::cumsum(real, 1) - 1 + first_position) * real;
  return sinusoidal_encoding(positions, dim, dtype) * mask.unsqueeze(-1).to(dtype);
}

}  // namespace cabert::models
