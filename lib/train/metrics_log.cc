#include "lib/train/metrics_log.h"

#include <filesystem>

#include "lib/io/record_file.h"

namespace cabert::train {

void MetricsLog::load_until(uint64_t step) {
  if (!std::filesystem::exists(path_)) return;
  io::RecordReader reader(path_);
  reader.expect("cabert.pb.MetricsRecord");
  pb::MetricsRecord record;
  while (reader.next(&record)) {
    if (record.step() <= step) records_.push_back(record);
  }
}

void MetricsLog::add(const std::string& phase, uint64_t step, double wall, const std::map<std::string, double>& values) {
  pb::MetricsRecord record;
  record.set_phase(phase);
  record.set_step(step);
  record.set_wall_seconds(wall);
  for (const auto& [k, v] : values) (*record.mutable_values())[k] = v;
  records_.push_back(record);
}

void MetricsLog::flush() {
  io::RecordWriter writer(path_, "cabert.pb.MetricsRecord", {{"model", config_.name()}});
  for (const auto& r : records_) writer.write(r);
  writer.close();
}

}  // namespace cabert::train
