// metrics.cabert of a pre-training run: MetricsRecord records ("train" per step, "eval" per evaluation),
// rewritten atomically at every checkpoint so that readers never see a partial file and a resumed run
// keeps the records up to its checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/metrics.pb.h"
#include "formats/model.pb.h"

namespace cabert::train {

class MetricsLog {
 public:
  MetricsLog(std::string path, const pb::ModelConfig& config) : path_(std::move(path)), config_(config) {}
  // Keeps the records of an earlier run up to `step` (resume).
  void load_until(uint64_t step);
  void add(const std::string& phase, uint64_t step, double wall, const std::map<std::string, double>& values);
  // Rewrites the whole stream atomically.
  void flush();

 private:
  std::string path_;
  pb::ModelConfig config_;
  std::vector<pb::MetricsRecord> records_;
};

}  // namespace cabert::train
