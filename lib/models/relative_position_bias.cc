#include "lib/models/relative_position_bias.h"

#include <cmath>

#include "lib/core/errors.h"

namespace cabert::models {

torch::Tensor t5_relative_buckets(const torch::Tensor& offsets, bool bidirectional, int64_t buckets,
                                  int64_t max_distance) {
  torch::Tensor base = torch::zeros_like(offsets);
  torch::Tensor distance;
  int64_t side = buckets;
  if (bidirectional) {
    side = buckets / 2;
    base = (offsets > 0).to(torch::kLong) * side;
    distance = offsets.abs();
  } else {
    distance = (-offsets).clamp_min(0);
  }
  const int64_t exact = side / 2;
  // The log-spaced position, floored by the cast where it is used (distance >= exact, so not negative), capped at
  // the side's last bucket. In float32 and in T5's order of operations: at the distances where the exact value is
  // a whole number (16, 32, 64 with T5's sizes) rounding decides the bucket, and this rounds as T5 does.
  torch::Tensor spread = torch::log(distance.to(torch::kFloat).clamp_min(1) / static_cast<double>(exact)) /
                         std::log(static_cast<double>(max_distance) / static_cast<double>(exact)) *
                         static_cast<double>(side - exact);
  torch::Tensor far = (exact + spread.to(torch::kLong)).clamp_max(side - 1);
  return base + torch::where(distance < exact, distance, far);
}

RelativePositionBiasImpl::RelativePositionBiasImpl(int64_t heads, int64_t buckets, int64_t max_distance,
                                                   bool bidirectional, double init_std)
    : buckets_(buckets), max_distance_(max_distance), bidirectional_(bidirectional) {
  if (buckets < 4 || buckets % 2 != 0 || max_distance <= buckets / 2) {
    throw UsageError(str("seq2seq.relative_buckets ", buckets, ", relative_max_distance ", max_distance,
                         ": expected an even number of at least 4 buckets and a maximum distance above half "
                         "of them (T5: 32 and 128)"));
  }
  table = register_parameter("table", torch::empty({heads, buckets}).normal_(0.0, init_std));
  band_buckets_cpu_ = t5_relative_buckets(torch::arange(-max_distance, max_distance + 1, torch::kLong), bidirectional,
                                          buckets, max_distance);
  band_buckets_ = band_buckets_cpu_;
}

const torch::Tensor& RelativePositionBiasImpl::band_buckets() const {
  if (band_buckets_.device() != table.device()) band_buckets_ = band_buckets_cpu_.to(table.device());
  return band_buckets_;
}

torch::Tensor RelativePositionBiasImpl::band() const { return table.index_select(1, band_buckets()); }

torch::Tensor RelativePositionBiasImpl::between(int64_t first_query, int64_t queries, int64_t keys) const {
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(table.device());
  torch::Tensor offsets = torch::arange(keys, options).unsqueeze(0) -
                          torch::arange(first_query, first_query + queries, options).unsqueeze(1);
  // An offset beyond D has D's bucket (band()'s comment), so the clamped offset's place in the band gives it.
  torch::Tensor bucket =
      band_buckets().index_select(0, (offsets.clamp(-max_distance_, max_distance_) + max_distance_).flatten());
  // [heads, queries * keys] -> [1, heads, queries, keys]
  return table.index_select(1, bucket).view({1, table.size(0), queries, keys});
}

}  // namespace cabert::models
