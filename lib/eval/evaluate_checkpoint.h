// A fine-tuned checkpoint scored on data files (`cabert evaluate --model`): a task model (an encoder with a task
// head, or an encoder-decoder fine-tuned text-to-text) on task files, with the task's metrics; a translation model
// (an encoder-decoder) on parallel text, with BLEU and chrF. One row per data file, and, when asked, a metrics
// record per scored file (-o) and the per-example predictions (GLUE submissions, SQuAD's JSON, hypotheses).
//
// Everything that can refuse the request fails when the evaluation is opened, before anything is scored or
// written: a task the checkpoint cannot be scored as, a bad row in the last file, two files for one predictions
// file. The records and predictions are written by finish(), all of them or none.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/task.pb.h"
#include "lib/eval/task_score.h"
#include "lib/eval/translation.h"
#include "lib/tasks/task_inputs.h"

namespace cabert::eval {

struct EvaluationOptions {
  std::string checkpoint;         // a checkpoint file (io::resolve_checkpoint_argument takes a model directory)
  std::vector<std::string> data;  // task files, a GLUE directory meaning its dev files; translation: TSV files
                                  // or directories of SPLIT.LANG files
  std::string task;               // "" = the checkpoint's; see evaluated_definition
  std::string tokenizer;          // "" = the checkpoint's
  std::string name;               // the records' model name; "" = the checkpoint's directory (record_model_name)
  std::string output;             // metrics records (cabert.pb.TaskMetrics); "" = none
  std::string predictions;        // a file, or a directory (existing or ending in '/'); "" = none
  torch::Device device = torch::kCPU;
  bool skip_bad_rows = false;
  // Task models.
  int batch_size = 64;
  std::optional<double> null_threshold;  // SQuAD v2.0; unset: the checkpoint's
  // Generic tasks: the columns and table format the checkpoint was trained with, unless given ("" = unchanged;
  // label_column "" = an unlabelled file).
  std::string text_column, text_pair_column, id_column, table_format;
  std::optional<std::string> label_column;
  // Text-to-text models: the label a submission (an unlabelled file) gets for an output that matches no label
  // text; "" = such a submission is refused.
  std::string unmatched_label;
  // Translation models.
  std::string split = "test";            // the split of a data directory
  std::string source_lang, target_lang;  // "" = the checkpoint's
  TranslateOptions translate;            // its device is `device`
  uint64_t max_examples = 0;             // only the first N pairs of each file (0 = all)
};

// One data file scored.
struct EvaluatedFile {
  // What -o holds for it: kind EVALUATION, model, task, split, data, examples, metrics (fractions), score (percent,
  // eval::task_score; translation: BLEU), checkpoint. Translation: `data` is the source file.
  pb::TaskMetrics record;
  bool labeled = true;            // false: an unlabelled (test) file, predictions only: no metrics, no record
  MetricMap metrics;              // the record's metrics, in name order
  TranslationScores translation;  // translation models: BLEU and chrF as scored (percent)
};

class CheckpointEvaluation {
 public:
  virtual ~CheckpointEvaluation() = default;
  // Whether the rows are a translation's (BLEU and chrF) or a task's (its metrics).
  virtual bool translation() const = 0;
  // The data files to score, a GLUE directory counting as its dev files.
  virtual size_t files() const = 0;
  // Scores file `index` (each once; records are written in the order scored).
  virtual EvaluatedFile evaluate(size_t index) = 0;
  // Writes every scored file's predictions, logging each, then the records file.
  virtual void finish() = 0;
};

// Loads the checkpoint (on options.device) and reads every data file.
std::unique_ptr<CheckpointEvaluation> open_evaluation(const EvaluationOptions& options);

// open_evaluation, every file scored in order, finish().
std::vector<EvaluatedFile> evaluate_checkpoint(const EvaluationOptions& options);

// The task a model fine-tuned on `trained` is scored as when asked for `task` ("" = its own): another GLUE task
// only with the same outputs from the same kind of input (MNLI -> AX, QQP -> MRPC); otherwise a UsageError naming
// `checkpoint`. Exposed for tests.
tasks::TaskDefinition evaluated_definition(const tasks::TaskDefinition& trained, const std::string& task,
                                           const std::string& checkpoint);

// The model name in metrics records: `name`, else the checkpoint's directory, as `finetune` records it (run-<k>/
// of --runs N belongs to its parent).
std::string record_model_name(const std::string& name, const std::string& checkpoint);

}  // namespace cabert::eval
