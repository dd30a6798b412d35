#include "lib/train/metric_sums.h"

#include <vector>

#include "lib/core/errors.h"

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
  if (device_.empty()) return sums;
  std::vector<torch::Tensor> values;
  for (const auto& [name, value] : device_) values.push_back(value.to(device_.begin()->second.device()));
  const torch::Tensor host = torch::stack(values).to(torch::kCPU).contiguous();  // the one copy (and wait)
  const double* data = host.data_ptr<double>();
  for (const auto& [name, value] : device_) sums[name] += *data++;
  return sums;
}

}  // namespace cabert::train
