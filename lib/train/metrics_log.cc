#include "lib/train/metrics_log.h"

#include <algorithm>
#include <filesystem>

#include "formats/metrics.pb.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/config/model_config_text.h"

namespace cabert::train {

MetricsLog::MetricsLog(const std::string& path, const pb::ModelConfig& config, int64_t keep_until_step,
                       const std::string& tensorboard_dir) {
  io::WriterOptions options;
  options.appended = true;
  // A new file is written beside the old one and replaces it at the first flush, so the old records can be
  // read while the new file is written.
  writer_ = std::make_unique<io::RecordWriter>(path, "cabert.pb.MetricsRecord",
                                               std::map<std::string, std::string>{{"model", config.name()}}, options);
  if (keep_until_step >= 0 && std::filesystem::exists(path)) carry_over(path, static_cast<uint64_t>(keep_until_step));
  writer_->flush();
  if (!tensorboard_dir.empty()) {
    tensorboard_ = std::make_unique<io::TensorboardLog>(tensorboard_dir, writer_->header(),
                                                        config::config_to_text(config), keep_until_step);
  }
}

MetricsLog::~MetricsLog() {
  try {
    close();
  } catch (const std::exception& e) {
    log_warning("metrics: ", e.what());
  }
}

void MetricsLog::carry_over(const std::string& path, uint64_t until_step) {
  uint64_t kept = 0;
  try {
    io::RecordReader reader(path);
    reader.expect("cabert.pb.MetricsRecord");
    pb::MetricsRecord record;
    while (reader.next(&record)) {
      if (record.step() > until_step) continue;
      writer_->write(record);
      carried_wall_seconds_ = std::max(carried_wall_seconds_, record.wall_seconds());
      ++kept;
    }
  } catch (const DataError& e) {
    // The metrics are a log, not the run's state: a damaged file does not stop the resume.
    log_warning("metrics: ", e.what(), "; kept its ", kept, " records before the damage");
  }
}

void MetricsLog::add(const std::string& phase, uint64_t step, double wall,
                     const std::map<std::string, double>& values) {
  pb::MetricsRecord record;
  record.set_phase(phase);
  record.set_step(step);
  record.set_wall_seconds(wall);
  for (const auto& [k, v] : values) (*record.mutable_values())[k] = v;
  writer_->write(record);
  writer_->flush();
  if (tensorboard_) tensorboard_->add(record);
}

void MetricsLog::close() {
  if (writer_) writer_->close();
  writer_.reset();
}

TaskMetricsLog::TaskMetricsLog(const std::string& path, const pb::ModelConfig& config,
                               const TaskMetricsLogOptions& options) {
  io::WriterOptions appended;
  appended.appended = true;
  writer_ = std::make_unique<io::RecordWriter>(path, "cabert.pb.TaskMetrics", options.metadata, appended);
  for (const auto& record : options.carried) {
    writer_->write(record);
    seconds_before_ = std::max(seconds_before_, record.seconds());
  }
  writer_->flush();
  if (!options.tensorboard_dir.empty()) {
    tensorboard_ = std::make_unique<io::TensorboardLog>(options.tensorboard_dir, writer_->header(),
                                                        config::config_to_text(config), options.resume_step,
                                                        options.resume_run, options.runs);
  }
}

void TaskMetricsLog::add(const pb::TaskMetrics& record) {
  writer_->write(record);
  writer_->flush();
  if (tensorboard_) tensorboard_->add(record);
}

}  // namespace cabert::train
