#include "lib/eval/evaluate_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/core/numbers.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/predict_split.h"
#include "lib/eval/task_model_loader.h"
#include "lib/eval/text_to_text.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/tasks/glue.h"
#include "lib/tasks/translation.h"

namespace fs = std::filesystem;

namespace cabert::eval {

namespace {

// Where the predictions of one data file go: inside a directory (an existing one, or a path ending in '/') as
// `file_name` (GLUE's submission names, <TASK>.tsv; a translation's <source stem>.<target language>), else the given
// file, which only one data file may use. A second data file for the same path is refused (`targets`: path -> the
// data file it holds), before anything is scored.
std::string predictions_target(const std::string& target, const std::string& file_name, const std::string& data_file,
                               size_t files, std::map<std::string, std::string>* targets) {
  std::error_code ec;
  const bool directory = fs::is_directory(target, ec) || (!target.empty() && target.back() == '/');
  if (!directory && files > 1) {
    throw UsageError("--predictions: with several data files, give a directory (one file per data file)");
  }
  if (directory) create_output_directory(target, "--predictions");
  const std::string path = directory ? (fs::path(target) / file_name).string() : target;
  auto [earlier, inserted] = targets->emplace(path, data_file);
  if (!inserted) {  // e.g. SST-2's test and dev files: both are SST-2.tsv in a directory
    throw UsageError(str("--predictions: ", earlier->second, " and ", data_file, " would both be written to ", path,
                         " (the same file name), the second over the first; evaluate them in separate runs or with "
                         "separate --predictions directories"));
  }
  return path;
}

// The records file (-o) and the predictions, held until every data file is scored, then written: all or none.
class EvaluationOutputs {
 public:
  explicit EvaluationOutputs(const char* what) : what_(what) {}

  void open_records(const std::string& path, const std::string& model_name) {
    if (path.empty()) return;
    writer_ = std::make_unique<io::RecordWriter>(path, "cabert.pb.TaskMetrics",
                                                 std::map<std::string, std::string>{{"model", model_name}});
  }
  void add_predictions(const std::string& path, std::string text, size_t count) {
    pending_.push_back({path, std::move(text), count});
  }
  void record(const pb::TaskMetrics& record) {
    if (writer_) writer_->write(record);
  }
  void finish() {
    for (const auto& output : pending_) {
      write_file_atomically(output.path, output.text);
      log_info("evaluate: ", output.count, " ", what_, " -> ", output.path);
    }
    if (writer_) writer_->close();
  }

 private:
  struct Pending {
    std::string path, text;
    size_t count;
  };
  const char* what_;  // "predictions", "translations"
  std::unique_ptr<io::RecordWriter> writer_;
  std::vector<Pending> pending_;
};

// The record of one scored file, but for its metrics and score.
pb::TaskMetrics evaluation_record(const EvaluationOptions& options, const std::string& model_name,
                                  const std::string& task, const std::string& split, const std::string& data,
                                  uint64_t examples) {
  pb::TaskMetrics record;
  record.set_kind(pb::TaskMetrics::EVALUATION);
  record.set_model(model_name);
  record.set_task(task);
  record.set_split(split);
  record.set_data(data);
  record.set_examples(examples);
  record.set_checkpoint(fs::absolute(options.checkpoint).lexically_normal().string());
  return record;
}

void check_unmatched_label(const EvaluationOptions& options, const tasks::TaskDefinition& definition,
                           bool text_to_text) {
  if (options.unmatched_label.empty()) return;
  if (!text_to_text) {
    throw UsageError(str("--unmatched-label: for text-to-text models; ", options.checkpoint,
                         " predicts a label with its task head"));
  }
  if (std::find(definition.labels.begin(), definition.labels.end(), options.unmatched_label) ==
      definition.labels.end()) {
    throw UsageError(str("--unmatched-label ", options.unmatched_label, ": expected one of ", definition.name,
                         "'s labels (", joined(definition.labels), ")"));
  }
}

// The files to score: a GLUE directory stands for its dev files.
std::vector<std::string> task_files(const std::vector<std::string>& data, const tasks::TaskDefinition& definition) {
  std::vector<std::string> files;
  for (const auto& path : data) {
    std::error_code ec;
    if (fs::is_directory(path, ec) && definition.glue) {
      const tasks::GlueTask& glue = tasks::glue_task(definition.name);
      for (const auto& file : glue.dev_files) files.push_back(tasks::glue_split_file(glue, path, file));
    } else {
      files.push_back(path);
    }
  }
  return files;
}

// The reading options the checkpoint was trained with, as the options change them.
tasks::TaskSource evaluated_source(tasks::TaskSource source, const EvaluationOptions& options) {
  source.skip_bad_rows = options.skip_bad_rows;
  if (!options.text_column.empty()) source.table.text_column = options.text_column;
  if (!options.text_pair_column.empty()) source.table.text_pair_column = options.text_pair_column;
  if (options.label_column) source.table.label_column = *options.label_column;
  if (!options.id_column.empty()) source.table.id_column = options.id_column;
  if (!options.table_format.empty()) {
    source.table.format = tasks::parse_table_format(options.table_format);
    source.format_given = true;
  }
  return source;
}

// An encoder with a task head, or an encoder-decoder fine-tuned text-to-text.
class TaskEvaluation final : public CheckpointEvaluation {
 public:
  TaskEvaluation(const EvaluationOptions& options, bool text_to_text)
      : options_(options), text_to_text_(text_to_text), outputs_("predictions") {
    load();
    definition_ = evaluated_definition(loaded_.definition, options.task, options.checkpoint);
    check_unmatched_label(options, definition_, text_to_text);
    tokenizer_.emplace(open_checkpoint_tokenizer(loaded_.info, options.checkpoint, options.tokenizer));
    const std::vector<std::string> files = task_files(options.data, definition_);
    const tasks::TaskSource source = evaluated_source(loaded_.source, options);
    predict_.max_length = loaded_.max_length;
    predict_.batch_size = options.batch_size;
    predict_.squad = loaded_.squad;
    if (options.null_threshold) predict_.squad.null_threshold = *options.null_threshold;
    predict_.device = options.device;
    model_name_ = record_model_name(options.name, options.checkpoint);
    outputs_.open_records(options.output, model_name_);
    read_files(files, source);
  }

  bool translation() const override { return false; }
  size_t files() const override { return files_.size(); }
  EvaluatedFile evaluate(size_t index) override;
  void finish() override { outputs_.finish(); }

 private:
  struct DataFile {
    std::string path, target;  // target: the predictions file ("" without predictions)
    tasks::TaskSplit split;
  };

  void load() {
    if (!text_to_text_) {
      loaded_ = load_task_model(options_.checkpoint, options_.device);
      return;
    }
    text_model_ = load_text_to_text_model(options_.checkpoint, options_.device);
    loaded_.definition = text_model_.definition;
    loaded_.source = text_model_.source;
    loaded_.info = text_model_.info;
    loaded_.max_length = text_model_.max_length;
  }

  // Every file is read, and where its predictions go settled, before the first prediction: a bad row in the
  // last file, or two files for one submission name, fail at once, before anything is written or printed.
  void read_files(const std::vector<std::string>& files, const tasks::TaskSource& source) {
    std::map<std::string, std::string> targets;  // prediction file -> the data file it holds
    for (const auto& path : files) {
      DataFile entry{path, "", tasks::read_task_file(definition_, path, source)};
      if (entry.split.size() == 0) throw DataError(str(path, ": expected examples to evaluate, got none"));
      if (!options_.predictions.empty()) {
        const bool squad = definition_.kind == tasks::TaskKind::kSpan;
        entry.target = predictions_target(options_.predictions, entry.split.metrics_task + (squad ? ".json" : ".tsv"),
                                          path, files.size(), &targets);
      }
      files_.push_back(std::move(entry));
    }
  }

  EvaluationOptions options_;
  bool text_to_text_;
  LoadedTaskModel loaded_;  // text-to-text: no model, the rest as text_model_'s
  LoadedTextToTextModel text_model_;
  tasks::TaskDefinition definition_;
  std::optional<text::Tokenizer> tokenizer_;
  PredictOptions predict_;
  std::string model_name_;
  EvaluationOutputs outputs_;
  std::vector<DataFile> files_;
};

EvaluatedFile TaskEvaluation::evaluate(size_t index) {
  const auto& [path, target, split] = files_.at(index);
  SplitPredictions predictions =
      text_to_text_
          ? predict_text_to_text(text_model_.model, definition_, text_model_.verbalizer, split, *tokenizer_, predict_)
          : predict_split(loaded_.model, definition_, split, *tokenizer_, predict_);
  if (text_to_text_ && !predictions.labeled && !options_.predictions.empty()) {
    submission_labels_only(&predictions, definition_, options_.unmatched_label, path);
  }
  if (!target.empty()) {
    outputs_.add_predictions(target, predictions_file_text(predictions, definition_), predictions.ids.size());
  }
  EvaluatedFile row;
  row.labeled = predictions.labeled;
  row.record =
      evaluation_record(options_, model_name_, split.metrics_task, fs::path(path).stem().string(), path, split.size());
  if (!row.labeled) return row;
  row.metrics = predictions.metrics;
  for (const auto& [metric, value] : predictions.metrics) (*row.record.mutable_metrics())[metric] = value;
  row.record.set_score(predictions.score);
  outputs_.record(row.record);
  return row;
}

// An encoder-decoder checkpoint: the split translated, the hypotheses (one line per source line) and BLEU and chrF.
class TranslationEvaluation final : public CheckpointEvaluation {
 public:
  explicit TranslationEvaluation(const EvaluationOptions& options)
      : options_(options), loaded_(load_seq2seq_model(options.checkpoint, options.device)), outputs_("translations") {
    files_.source_lang = stored("source_lang", options.source_lang);
    files_.target_lang = stored("target_lang", options.target_lang);
    files_.read.skip_bad_rows = options.skip_bad_rows;
    files_.read.max_pairs = options.max_examples;
    if (files_.source_lang.empty() || files_.target_lang.empty()) {
      throw UsageError(str(options.checkpoint, " names no languages; pass --source-lang and --target-lang"));
    }
    if (!options.unmatched_label.empty()) {
      throw UsageError(
          str("--unmatched-label: for text-to-text models; ", options.checkpoint, " is a translation model"));
    }
    tokenizer_.emplace(open_checkpoint_tokenizer(loaded_.info, options.checkpoint, options.tokenizer));
    translate_ = options.translate;
    translate_.device = options.device;
    model_name_ = record_model_name(options.name, options.checkpoint);
    outputs_.open_records(options.output, model_name_);
    read_files();
  }

  bool translation() const override { return true; }
  size_t files() const override { return splits_.size(); }
  EvaluatedFile evaluate(size_t index) override;
  void finish() override { outputs_.finish(); }

 private:
  struct Split {
    std::string path, target;
    tasks::ParallelData pairs;
  };

  // The option, else the checkpoint's metadata `key`, else "".
  std::string stored(const char* key, const std::string& given) const {
    if (!given.empty()) return given;
    const auto& metadata = loaded_.info.metadata();
    auto found = metadata.find(key);
    return found == metadata.end() ? std::string() : found->second;
  }

  // The checkpoint's metadata `key` (a token count), 256 without it.
  int stored_limit(const char* key) const {
    const auto& metadata = loaded_.info.metadata();
    auto found = metadata.find(key);
    return found == metadata.end()
               ? 256
               : static_cast<int>(
                     parse_integer(found->second, 1, 1 << 20, str(options_.checkpoint, ": metadata '", key, "'")));
  }

  // Every file is read first, as for the tasks.
  void read_files() {
    std::map<std::string, std::string> targets;
    for (const auto& path : options_.data) {
      Split entry{path, "", tasks::read_translation_split(path, options_.split, files_)};
      if (entry.pairs.pairs.empty()) {
        throw DataError(str(entry.pairs.source_path, ": expected sentence pairs to translate, got none"));
      }
      if (!options_.predictions.empty()) {
        const std::string name = fs::path(entry.pairs.source_path).stem().string() + "." + files_.target_lang;
        entry.target =
            predictions_target(options_.predictions, name, entry.pairs.source_path, options_.data.size(), &targets);
      }
      splits_.push_back(std::move(entry));
    }
  }

  EvaluationOptions options_;
  LoadedSeq2SeqModel loaded_;
  tasks::TranslationFiles files_;
  std::optional<text::Tokenizer> tokenizer_;
  TranslateOptions translate_;
  std::string model_name_;
  EvaluationOutputs outputs_;
  std::vector<Split> splits_;
};

EvaluatedFile TranslationEvaluation::evaluate(size_t index) {
  const auto& [path, target, pairs] = splits_.at(index);
  std::vector<data::Seq2SeqExample> examples =
      tasks::encode_pairs(pairs, *tokenizer_, stored_limit("max_source_tokens"), stored_limit("max_target_tokens"));
  std::vector<std::string> references;
  for (const auto& pair : pairs.pairs) references.push_back(pair.target);
  DecodingCost cost;
  std::vector<std::string> hypotheses = translate_examples(loaded_.model, examples, *tokenizer_, translate_, &cost);
  if (!target.empty()) {
    std::string text;
    for (const auto& line : hypotheses) text += line + "\n";
    outputs_.add_predictions(target, std::move(text), hypotheses.size());
  }
  EvaluatedFile row;
  row.translation = score_translations(hypotheses, references);
  const std::string split = fs::is_directory(path) ? options_.split : fs::path(path).stem().string();
  row.record = evaluation_record(options_, model_name_, tasks::translation_task_name(files_), split, pairs.source_path,
                                 hypotheses.size());
  row.metrics = {{"bleu", row.translation.bleu.score / 100}, {"chrf", row.translation.chrf.score / 100}};
  for (const auto& [metric, value] : row.metrics) (*row.record.mutable_metrics())[metric] = value;
  // The decoding speed (Wu et al.'s "faster decoding"), beside the scores and not among them.
  (*row.record.mutable_metrics())["decode_tokens"] = static_cast<double>(cost.generated_tokens);
  (*row.record.mutable_metrics())["decode_seconds"] = cost.seconds;
  (*row.record.mutable_metrics())["decode_tokens_per_second"] = cost.tokens_per_second();
  row.record.set_score(row.translation.bleu.score);
  outputs_.record(row.record);
  return row;
}

}  // namespace

tasks::TaskDefinition evaluated_definition(const tasks::TaskDefinition& trained, const std::string& task,
                                           const std::string& checkpoint) {
  if (task.empty()) return trained;
  tasks::TaskDefinition requested;
  if (!tasks::known_task(task, &requested)) requested.name = task;
  if (requested.name == trained.name) return trained;
  // Another GLUE task only with the same outputs from the same kind of input (MNLI -> AX, QQP -> MRPC): a
  // single-sentence model never sees a pair's second sentence (SST-2 -> MRPC would score it on the first
  // sentences alone), and labels spelt alike may judge different things (SST-2's 1 is a positive sentence,
  // CoLA's an acceptable one).
  const bool same_labels = requested.glue && trained.glue && requested.kind == trained.kind &&
                           requested.labels == trained.labels && requested.pair == trained.pair;
  const std::string& judged = same_labels ? tasks::glue_task(trained.name).judgement : trained.name;
  const std::string& asked = same_labels ? tasks::glue_task(requested.name).judgement : requested.name;
  if (judged != asked) {
    throw UsageError(
        str(checkpoint, " was fine-tuned on ", trained.name, "; it cannot be evaluated as ", requested.name,
            same_labels ? str(" (", trained.name, "'s labels judge ", judged, ", ", requested.name, "'s ", asked, ")")
                        : std::string()));
  }
  return requested;  // e.g. an MNLI model on AX (diagnostic)
}

std::string record_model_name(const std::string& name, const std::string& checkpoint) {
  if (!name.empty()) return name;
  fs::path directory = fs::absolute(checkpoint).lexically_normal().parent_path();
  if (directory.filename().string().rfind("run-", 0) == 0) directory = directory.parent_path();
  return directory.filename().string();
}

std::unique_ptr<CheckpointEvaluation> open_evaluation(const EvaluationOptions& options) {
  const pb::CheckpointInfo info = io::read_checkpoint_info(options.checkpoint);
  const bool text_to_text = is_text_to_text(info);
  if (info.model().has_seq2seq() && !text_to_text) return std::make_unique<TranslationEvaluation>(options);
  return std::make_unique<TaskEvaluation>(options, text_to_text);
}

std::vector<EvaluatedFile> evaluate_checkpoint(const EvaluationOptions& options) {
  std::unique_ptr<CheckpointEvaluation> evaluation = open_evaluation(options);
  std::vector<EvaluatedFile> rows;
  for (size_t i = 0; i < evaluation->files(); ++i) rows.push_back(evaluation->evaluate(i));
  evaluation->finish();
  return rows;
}

}  // namespace cabert::eval
