// metrics.cabert of a run, appended as it goes. MetricsLog: a pre-training run's MetricsRecord records
// ("train" per step, "eval" per evaluation), appended as they happen. Every add() writes a complete frame that readers (`cabert inspect`, pictures) see
// at once, and nothing is kept in memory, so a million-step run needs no more memory than a short one. A
// resumed run starts the file again from the earlier run's records up to its checkpoint (a killed run may
// have logged steps past it), and its wall clock goes on from theirs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "formats/task.pb.h"
#include "lib/io/record_file.h"
#include "lib/io/tensorboard_metrics.h"

namespace cabert::train {

class MetricsLog {
 public:
  // keep_until_step >= 0 (resume): the records of the existing file up to that step are carried over.
  // tensorboard_dir: also write every record to TensorBoard event files there (io::TensorboardLog).
  MetricsLog(const std::string& path, const pb::ModelConfig& config, int64_t keep_until_step = -1,
             const std::string& tensorboard_dir = "");
  // Writes the footer when close() was not called (an error or a signal ended the run); a process killed
  // outright leaves the file without one, which readers accept (io::RecordReader::unfinished()).
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void add(const std::string& phase, uint64_t step, double wall, const std::map<std::string, double>& values);
  void close();
  // The wall_seconds of the last record carried over (0 for a new run).
  double carried_wall_seconds() const { return carried_wall_seconds_; }
  // The --tensorboard log (nullptr without one).
  io::TensorboardLog* tensorboard() const { return tensorboard_.get(); }

 private:
  void carry_over(const std::string& path, uint64_t until_step);

  std::unique_ptr<io::RecordWriter> writer_;
  std::unique_ptr<io::TensorboardLog> tensorboard_;
  double carried_wall_seconds_ = 0;
};

// TaskMetricsLog: a fine-tuning or translation run's TaskMetrics records (TRAIN intervals, EPOCH results, ...),
// each written and flushed as it comes, so `cabert inspect` reads a running job. A resumed run starts the file
// again from the records it keeps (records_before in training_loop.h), and its clock goes on from theirs.
struct TaskMetricsLogOptions {
  std::map<std::string, std::string> metadata;  // the file header's (task, model, the schedule's settings, ...)
  std::vector<pb::TaskMetrics> carried;         // the earlier part of a resumed run
  std::string tensorboard_dir;                  // --tensorboard: also every record to TensorBoard event files
  int64_t resume_step = -1;                     // >= 0: TensorBoard's run `resume_run` continues after this step
  uint32_t resume_run = 0;
  uint32_t runs = 1;  // finetune --runs: one event file per run
};

class TaskMetricsLog {
 public:
  TaskMetricsLog(const std::string& path, const pb::ModelConfig& config, const TaskMetricsLogOptions& options);
  TaskMetricsLog(const TaskMetricsLog&) = delete;
  TaskMetricsLog& operator=(const TaskMetricsLog&) = delete;

  void add(const pb::TaskMetrics& record);
  // Writes the footer: the run ended, finished or interrupted by a signal (without it, readers take the file as
  // one whose writer was killed).
  void close() { writer_->close(); }
  // The seconds of the run before the resume (the largest `seconds` of the carried records; 0 for a new run).
  double seconds_before() const { return seconds_before_; }
  // The --tensorboard log (nullptr without one).
  io::TensorboardLog* tensorboard() const { return tensorboard_.get(); }

 private:
  std::unique_ptr<io::RecordWriter> writer_;
  std::unique_ptr<io::TensorboardLog> tensorboard_;
  double seconds_before_ = 0;
};

}  // namespace cabert::train
