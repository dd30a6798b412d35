#include "lib/train/metric_sums.h"

#include <vector>

#include "lib/core/errors.h"
#include "lib/ops/device.h"

namespace cabert::train {

void MetricSums::add(const std::string& name, double value) { host_[name] += value; }

void MetricSums::add(const std::string& name, const torch::Tensor& value) {
  if (value.numel() != 1) throw Error(str("internal: metric sum '", name, "' has ", value.numel(), " elements"));
  const torch::Tensor sum = value.detach().reshape({}).to(torch::kDouble);
  torch::Tensor& slot = device_[name];
  slot = slot.defined() ? slot + sum : sum;
}

void MetricSums::add(const MetricSums& other) {
  for (const auto& [name, value] : other.host_) add(name, value);
  for (const auto& [name, value] : other.device_) add(name, value);
}

std::map<std::string, double> MetricSums::read() const {
  std::map<std::string, double> sums = host_;
  std::vector<torch::Tensor> values;
  for (const auto& [name, value] : device_) values.push_back(value);
  const std::vector<double> read = ops::read_scalars(values);
  size_t i = 0;
  for (const auto& [name, value] : device_) sums[name] += read[i++];
  return sums;
}

}  // namespace cabert::train
