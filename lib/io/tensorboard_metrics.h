// cabert's training records as TensorBoard summaries: one mapping, used by `export --metrics FILE...
// --tensorboard DIR` for finished runs and by the --tensorboard DIR of pretrain / finetune for live ones, so the
// two give the same tags at the same steps.
//
//   pb::MetricsRecord (pretrain)  every value under "<phase>/<name>": "train/loss", "train/lr", "eval/mlm_loss", ...
//   pb::TaskMetrics (finetune)    TRAIN: "train/loss"; EPOCH: "dev/<task>/<metric>", "dev/<task>/score" and
//                                 "train/epoch_loss" at the epoch's step; BEST_OF_RUN: text "best/<task>"
//   the file's header             text "run/options" at step 0 (version, command line, resolved config)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/header.pb.h"
#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/io/tensorboard_writer.h"

namespace cabert::io {

// Markdown for TensorBoard's text plugin: the producer's version, the command line and the resolved config
// (code blocks, so the plugin shows them as written).
std::string run_options_markdown(const pb::Header& header);

// wall_time: seconds since the Unix epoch (the run's start plus the record's own seconds).
void write_summary(TensorboardWriter& writer, const pb::MetricsRecord& record, double wall_time);
void write_summary(TensorboardWriter& writer, const pb::TaskMetrics& record, double wall_time);

struct TensorboardRun {
  std::string metrics;  // a metrics.cabert of pretrain or finetune
  std::string label;    // the TensorBoard run (a subdirectory of the output); "" = the file's directory name
};

// Writes an event file per run (per --runs N run of a fine-tuning file) under dir/<label>[/run-<k>] (k from 0,
// as finetune names its run directories); returns their paths. Each file starts with a restart at step 0, so exporting a run again replaces, in TensorBoard's
// view, what an earlier export wrote there.
std::vector<std::string> export_tensorboard(const std::vector<TensorboardRun>& runs, const std::string& dir);

// The --tensorboard DIR of a training run (rank 0 only): the records it appends to metrics.cabert, as it appends
// them, with the run's options and model config as text "run/options" at step 0. A resumed run writes a new file
// that restarts at the step after its checkpoint's (and writes its options there), so its curves go on from the
// checkpoint: TensorBoard drops what the interrupted run logged after it. With runs > 1 (finetune --runs N) each
// run is DIR/run-<k>, as for export_tensorboard.
class TensorboardLog {
 public:
  // resume_step >= 0: run `resume_run` continues after that step.
  TensorboardLog(std::string dir, const pb::Header& header, std::string model_config, int64_t resume_step = -1,
                 uint32_t resume_run = 0, uint32_t runs = 1);
  void add(const pb::MetricsRecord& record);
  void add(const pb::TaskMetrics& record);
  // A PNG (RGB) of run `run` (finetune --runs N; else 0), e.g. the learned kernels `export --pictures` draws, at
  // `step`.
  void image(const std::string& tag, int64_t step, const std::string& png, int width, int height, uint32_t run = 0);
  const std::string& dir() const { return dir_; }

 private:
  TensorboardWriter& writer(uint32_t run);

  std::string dir_, options_;
  int64_t resume_step_;
  uint32_t resume_run_, runs_;
  std::map<uint32_t, std::unique_ptr<TensorboardWriter>> writers_;
};

}  // namespace cabert::io
