// The sums a training step reports (losses, counts, correct predictions), added over micro-batches and read once
// per step. A sum computed on the device stays there as a tensor until read(), which copies all of them to the
// host in one transfer: on CUDA, a .item() per sum per micro-batch stalled the host on the device ten times a
// step (ELECTRA) where one copy suffices.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace cabert::train {

class MetricSums {
 public:
  void add(const std::string& name, double value);
  // value: a one-element tensor on any device (detached, and kept in double).
  void add(const std::string& name, const torch::Tensor& value);
  void add(const MetricSums& other);

  // Every sum, host and device ones together; a name added both ways gets both.
  std::map<std::string, double> read() const;

 private:
  std::map<std::string, double> host_;
  std::map<std::string, torch::Tensor> device_;
};

}  // namespace cabert::train
