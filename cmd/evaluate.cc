// cabert evaluate: score a fine-tuned checkpoint on task files (metrics record, printed table, per-example
// predictions, GLUE submission TSVs, SQuAD prediction JSON), or merge metrics records into the papers' table.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "cmd/commands.h"
#include "cmd/compute_flags.h"
#include "lib/core/errors.h"
#include "lib/core/numbers.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/predict_split.h"
#include "lib/eval/summary.h"
#include "lib/eval/task_model_loader.h"
#include "lib/eval/text_to_text.h"
#include "lib/eval/translation.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/tasks/glue.h"
#include "lib/tasks/translation.h"
#include "lib/train/checkpoint.h"

namespace fs = std::filesystem;

namespace cabert::cmd {

namespace {

struct EvaluateCommand {
  std::string model, task, tokenizer, output, predictions, name;
  ComputeFlags compute;
  std::vector<std::string> data, summarize;
  std::string format = "markdown", aggregate = "mean";
  bool glue_with_wnli = false, skip_bad_rows = false;
  int batch_size = 64;
  double null_threshold = 0;
  bool null_threshold_given = false;
  // Generic tasks: override the columns the checkpoint was trained with (e.g. --label-column "" for a file
  // without labels).
  std::string text_column, text_pair_column, label_column, id_column, table_format;
  bool label_column_given = false;
  // Text-to-text models: the label written into a submission (an unlabelled file) for an output that matches no
  // label text; without it such a submission is refused.
  std::string unmatched_label;
  // Translation checkpoints (encoder-decoders).
  std::string split = "test", source_lang, target_lang;
  eval::TranslateOptions translate;
  uint64_t max_examples = 0;
};

// The row name in metrics records: --name, else the model directory's name, as `finetune` records it (run-<k>/
// of --runs N belongs to its parent).
std::string record_model_name(const EvaluateCommand& command) {
  if (!command.name.empty()) return command.name;
  fs::path directory = fs::absolute(command.model).lexically_normal().parent_path();
  if (directory.filename().string().rfind("run-", 0) == 0) directory = directory.parent_path();
  return directory.filename().string();
}

// Where the predictions of one data file go: inside a directory (an existing one, or a path ending in '/') as
// `file_name` (GLUE's submission names, <TASK>.tsv; a translation's <source stem>.<target language>), else the given
// file, which only one data file may use. A second data file for the same path is refused (`targets`: path -> the
// data file it holds), before anything is scored.
std::string predictions_path(const std::string& target, const std::string& file_name, const std::string& data_file,
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

// Predictions held until every data file is scored, then written: all of them or none.
struct PendingOutput {
  std::string path, text;
  size_t count;
};

void write_outputs(const std::vector<PendingOutput>& outputs, const char* what) {
  for (const auto& output : outputs) {
    write_file_atomically(output.path, output.text);
    log_info("evaluate: ", output.count, " ", what, " -> ", output.path);
  }
}

// An encoder-decoder checkpoint: translate the split, write the hypotheses (--predictions, one line per source
// line), print and record BLEU and chrF.
void run_translation_evaluate(const EvaluateCommand& command, torch::Device device) {
  eval::LoadedSeq2SeqModel loaded = eval::load_seq2seq_model(command.model, device);
  const auto& metadata = loaded.info.metadata();
  auto stored = [&](const char* key, const std::string& given) {
    if (!given.empty()) return given;
    auto found = metadata.find(key);
    return found == metadata.end() ? std::string() : found->second;
  };
  tasks::TranslationFiles files;
  files.source_lang = stored("source_lang", command.source_lang);
  files.target_lang = stored("target_lang", command.target_lang);
  files.read.skip_bad_rows = command.skip_bad_rows;
  files.read.max_pairs = command.max_examples;
  if (files.source_lang.empty() || files.target_lang.empty()) {
    throw UsageError(str(command.model, " names no languages; pass --source-lang and --target-lang"));
  }
  if (!command.unmatched_label.empty()) {
    throw UsageError(str("--unmatched-label: for text-to-text models; ", command.model, " is a translation model"));
  }
  const text::Tokenizer tokenizer = eval::open_checkpoint_tokenizer(loaded.info, command.model, command.tokenizer);
  auto limit = [&](const char* key) {
    auto found = metadata.find(key);
    return found == metadata.end() ? 256
                                   : static_cast<int>(parse_integer(found->second, 1, 1 << 20,
                                                                    str(command.model, ": metadata '", key, "'")));
  };
  eval::TranslateOptions translate = command.translate;
  translate.device = device;
  std::unique_ptr<io::RecordWriter> writer;
  const std::string model_name = record_model_name(command);
  if (!command.output.empty()) {
    writer = std::make_unique<io::RecordWriter>(command.output, "cabert.pb.TaskMetrics",
                                                std::map<std::string, std::string>{{"model", model_name}});
  }
  // Every file is read first, as for the tasks below.
  struct Split {
    std::string path, target;
    tasks::ParallelData pairs;
  };
  std::vector<Split> splits;
  std::map<std::string, std::string> targets;
  for (const auto& path : command.data) {
    Split entry{path, "", tasks::read_translation_split(path, command.split, files)};
    if (entry.pairs.pairs.empty()) {
      throw DataError(str(entry.pairs.source_path, ": expected sentence pairs to translate, got none"));
    }
    if (!command.predictions.empty()) {
      const std::string name = fs::path(entry.pairs.source_path).stem().string() + "." + files.target_lang;
      entry.target =
          predictions_path(command.predictions, name, entry.pairs.source_path, command.data.size(), &targets);
    }
    splits.push_back(std::move(entry));
  }
  std::printf("| task | data | sentences | BLEU | chrF | details |\n|---|---|---:|---:|---:|---|\n");
  std::vector<PendingOutput> outputs;
  for (const auto& [path, target, pairs] : splits) {
    std::vector<data::Seq2SeqExample> examples = tasks::encode_pairs(
        pairs, tokenizer, limit("max_source_tokens"), limit("max_target_tokens"));
    std::vector<std::string> references;
    for (const auto& pair : pairs.pairs) references.push_back(pair.target);
    std::vector<std::string> hypotheses = eval::translate_examples(loaded.model, examples, tokenizer, translate);
    if (!target.empty()) {
      std::string text;
      for (const auto& line : hypotheses) text += line + "\n";
      outputs.push_back({target, std::move(text), hypotheses.size()});
    }
    eval::TranslationScores scores = eval::score_translations(hypotheses, references);
    const std::string task = tasks::translation_task_name(files);
    std::printf("| %s | %s | %zu | %.2f | %.2f | %s |\n", task.c_str(), pairs.source_path.c_str(), hypotheses.size(),
                scores.bleu.score, scores.chrf.score, eval::format_bleu(scores.bleu).c_str());
    if (writer) {
      pb::TaskMetrics record;
      record.set_kind(pb::TaskMetrics::EVALUATION);
      record.set_model(model_name);
      record.set_task(task);
      record.set_split(fs::is_directory(path) ? command.split : fs::path(path).stem().string());
      record.set_data(pairs.source_path);
      record.set_examples(hypotheses.size());
      (*record.mutable_metrics())["bleu"] = scores.bleu.score / 100;
      (*record.mutable_metrics())["chrf"] = scores.chrf.score / 100;
      record.set_score(scores.bleu.score);
      record.set_checkpoint(fs::absolute(command.model).lexically_normal().string());
      writer->write(record);
    }
  }
  write_outputs(outputs, "translations");
  if (writer) writer->close();
}

void run_summarize(const EvaluateCommand& command) {
  std::vector<pb::TaskMetrics> records;
  auto read_records = [&](const std::string& path) {
    io::RecordReader reader(path);
    reader.expect("cabert.pb.TaskMetrics");
    pb::TaskMetrics record;
    while (reader.next(&record)) records.push_back(record);
  };
  for (const auto& input : command.summarize) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {
      read_records(input);
      continue;
    }
    // A directory (e.g. a sweep of model directories): every metrics file below it; checkpoints and other
    // cabert files are passed over.
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(input)) {
      if (entry.is_regular_file() && entry.path().extension() == ".cabert") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      io::RecordReader probe(file);
      if (probe.header().message_type() == "cabert.pb.TaskMetrics") read_records(file);
    }
  }
  eval::SummaryOptions options;
  options.aggregate = eval::parse_run_aggregate(command.aggregate);
  options.glue_with_wnli = command.glue_with_wnli;
  eval::SummaryFormat format = eval::parse_summary_format(command.format);
  eval::SummaryTable table = eval::summarize(records, options);
  if (table.models.empty()) {
    throw DataError("--summarize: the files hold no run or evaluation results (only per-epoch records or none)");
  }
  std::string text = eval::render_summary(table, format, options);
  if (command.output.empty() || command.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file_atomically(command.output, text);
  }
}

void run_evaluate(const EvaluateCommand& command) {
  if (command.model.empty()) throw UsageError("--model CKPT is required (or --summarize METRICS...)");
  if (command.data.empty()) throw UsageError("--data FILE is required");
  torch::Device device(apply_compute_flags(command.compute));
  const pb::CheckpointInfo checkpoint_info = io::read_checkpoint_info(command.model);
  const bool text_to_text = eval::is_text_to_text(checkpoint_info);
  if (checkpoint_info.model().has_seq2seq() && !text_to_text) {
    run_translation_evaluate(command, device);
    return;
  }
  // An encoder with a task head, or an encoder-decoder fine-tuned text-to-text.
  eval::LoadedTaskModel loaded;
  eval::LoadedTextToTextModel loaded_text;
  if (text_to_text) {
    loaded_text = eval::load_text_to_text_model(command.model, device);
    loaded.definition = loaded_text.definition;
    loaded.source = loaded_text.source;
    loaded.info = loaded_text.info;
    loaded.max_length = loaded_text.max_length;
  } else {
    loaded = eval::load_task_model(command.model, device);
  }
  tasks::TaskDefinition definition = loaded.definition;
  if (!command.task.empty()) {
    tasks::TaskDefinition requested;
    if (!tasks::known_task(command.task, &requested)) requested.name = command.task;
    if (requested.name != definition.name) {
      // Another GLUE task only with the same outputs from the same kind of input (MNLI -> AX, QQP -> MRPC): a
      // single-sentence model never sees a pair's second sentence (SST-2 -> MRPC would score it on the first
      // sentences alone), and labels spelt alike may judge different things (SST-2's 1 is a positive sentence,
      // CoLA's an acceptable one).
      const bool same_labels = requested.glue && definition.glue && requested.kind == definition.kind &&
                               requested.labels == definition.labels && requested.pair == definition.pair;
      const std::string& judged = same_labels ? tasks::glue_task(definition.name).judgement : definition.name;
      const std::string& asked = same_labels ? tasks::glue_task(requested.name).judgement : requested.name;
      if (judged != asked) {
        throw UsageError(
            str(command.model, " was fine-tuned on ", definition.name, "; it cannot be evaluated as ", requested.name,
                same_labels
                    ? str(" (", definition.name, "'s labels judge ", judged, ", ", requested.name, "'s ", asked, ")")
                    : std::string()));
      }
      definition = requested;  // e.g. an MNLI model on AX (diagnostic)
    }
  }
  if (!command.unmatched_label.empty()) {
    if (!text_to_text) {
      throw UsageError(
          str("--unmatched-label: for text-to-text models; ", command.model, " predicts a label with its task head"));
    }
    if (std::find(definition.labels.begin(), definition.labels.end(), command.unmatched_label) ==
        definition.labels.end()) {
      throw UsageError(str("--unmatched-label ", command.unmatched_label, ": expected one of ", definition.name,
                           "'s labels (", joined(definition.labels), ")"));
    }
  }
  const text::Tokenizer tokenizer = eval::open_checkpoint_tokenizer(loaded.info, command.model, command.tokenizer);

  std::vector<std::string> files;
  for (const auto& path : command.data) {
    std::error_code ec;
    if (fs::is_directory(path, ec) && definition.glue) {
      const tasks::GlueTask& glue = tasks::glue_task(definition.name);
      for (const auto& file : glue.dev_files) files.push_back(tasks::glue_split_file(glue, path, file));
    } else {
      files.push_back(path);
    }
  }
  tasks::TaskSource source = loaded.source;
  source.skip_bad_rows = command.skip_bad_rows;
  if (!command.text_column.empty()) source.table.text_column = command.text_column;
  if (!command.text_pair_column.empty()) source.table.text_pair_column = command.text_pair_column;
  if (command.label_column_given) source.table.label_column = command.label_column;
  if (!command.id_column.empty()) source.table.id_column = command.id_column;
  if (!command.table_format.empty()) {
    source.table.format = tasks::parse_table_format(command.table_format);
    source.format_given = true;
  }
  eval::PredictOptions predict;
  predict.max_length = loaded.max_length;
  predict.batch_size = command.batch_size;
  predict.squad = loaded.squad;
  if (command.null_threshold_given) predict.squad.null_threshold = command.null_threshold;
  predict.device = device;

  const std::string model_name = record_model_name(command);

  std::unique_ptr<io::RecordWriter> writer;
  if (!command.output.empty()) {
    writer = std::make_unique<io::RecordWriter>(command.output, "cabert.pb.TaskMetrics",
                                                std::map<std::string, std::string>{{"model", model_name}});
  }
  // Every file is read, and where its predictions go settled, before the first prediction: a bad row in the
  // last file, or two files for one submission name, fail at once, before anything is written or printed.
  struct Split {
    std::string path, target;  // target: the predictions file ("" without --predictions)
    tasks::TaskSplit split;
  };
  std::vector<Split> splits;
  std::map<std::string, std::string> targets;  // prediction file -> the data file it holds
  for (const auto& path : files) {
    Split entry{path, "", tasks::read_task_file(definition, path, source)};
    if (entry.split.size() == 0) throw DataError(str(path, ": expected examples to evaluate, got none"));
    if (!command.predictions.empty()) {
      const bool squad = definition.kind == tasks::TaskKind::kSpan;
      entry.target = predictions_path(command.predictions, entry.split.metrics_task + (squad ? ".json" : ".tsv"), path,
                                      files.size(), &targets);
    }
    splits.push_back(std::move(entry));
  }

  std::printf("| task | data | examples | score | metrics |\n|---|---|---:|---:|---|\n");
  std::vector<PendingOutput> outputs;
  for (const auto& [path, target, split] : splits) {
    eval::SplitPredictions predictions =
        text_to_text ? eval::predict_text_to_text(loaded_text.model, definition, loaded_text.verbalizer, split, tokenizer,
                                                  predict)
                     : eval::predict_split(loaded.model, definition, split, tokenizer, predict);
    if (text_to_text && !predictions.labeled && !command.predictions.empty()) {
      eval::submission_labels_only(&predictions, definition, command.unmatched_label, path);
    }
    if (!target.empty()) {
      outputs.push_back({target, eval::predictions_file_text(predictions, definition), predictions.ids.size()});
    }
    if (!predictions.labeled) {
      std::printf("| %s | %s | %zu | - | unlabelled (test) file: predictions only |\n", split.metrics_task.c_str(),
                  path.c_str(), split.size());
      continue;
    }
    std::string metrics;
    for (const auto& [metric, value] : predictions.metrics) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%s %.2f", metric.c_str(), 100 * value);
      metrics += (metrics.empty() ? "" : ", ") + std::string(buffer);
    }
    std::printf("| %s | %s | %zu | %.2f | %s |\n", split.metrics_task.c_str(), path.c_str(), split.size(),
                predictions.score, metrics.c_str());
    if (writer) {
      pb::TaskMetrics record;
      record.set_kind(pb::TaskMetrics::EVALUATION);
      record.set_model(model_name);
      record.set_task(split.metrics_task);
      record.set_split(fs::path(path).stem().string());
      record.set_data(path);
      record.set_examples(split.size());
      for (const auto& [metric, value] : predictions.metrics) (*record.mutable_metrics())[metric] = value;
      record.set_score(predictions.score);
      record.set_checkpoint(fs::absolute(command.model).lexically_normal().string());
      writer->write(record);
    }
  }
  write_outputs(outputs, "predictions");
  if (writer) writer->close();
}

}  // namespace

void add_evaluate(CLI::App& app) {
  auto command = std::make_shared<EvaluateCommand>();
  CLI::App* sub = app.add_subcommand(
      "evaluate", "Score a fine-tuned checkpoint (metrics, predictions, GLUE submissions) or --summarize metrics");
  sub->add_option("--model", command->model, "Fine-tuned checkpoint (best.cabert from `cabert finetune`), or its directory");
  sub->add_option("--task", command->task,
                  "Task (default: the checkpoint's); an MNLI model can be scored on AX (diagnostic)");
  sub->add_option("--data", command->data, "Task file(s); a GLUE directory means its dev file(s)");
  sub->add_option("--tokenizer", command->tokenizer, "SentencePiece model (default: the checkpoint's)");
  sub->add_option("-o,--output", command->output,
                  "Metrics record file (evaluation); with --summarize, the table (default stdout)");
  sub->add_option("--predictions", command->predictions,
                  "Per-example predictions: TSV (id, prediction, gold, scores); GLUE test files give the "
                  "submission TSV (index, prediction), SQuAD the {id: answer} JSON. A directory gets <TASK>.tsv. "
                  "Translation: the hypotheses, one line per source line (a directory gets <source stem>.<target "
                  "language>). Several --data files need a directory; all are written once every file is scored");
  sub->add_option("--name", command->name, "Model name in the metrics record (default: the checkpoint's directory)");
  sub->add_option("--batch-size", command->batch_size, "Evaluation batch size")->capture_default_str();
  auto* threshold = sub->add_option("--null-threshold", command->null_threshold,
                                    "SQuAD v2.0: override the checkpoint's null-score threshold");
  sub->add_flag("--skip-bad-rows", command->skip_bad_rows, "Skip malformed rows instead of stopping");
  sub->add_option("--unmatched-label", command->unmatched_label,
                  "Text-to-text models: the label a submission (unlabelled file) gets for an output that matches no "
                  "label text (default: such a submission is refused)");
  sub->add_option("--text-column", command->text_column, "Generic tasks: text column (default: as fine-tuned)");
  sub->add_option("--text-pair-column", command->text_pair_column, "Generic tasks: second text column");
  auto* label_column = sub->add_option("--label-column", command->label_column,
                                       "Generic tasks: label column; \"\" for an unlabelled file");
  sub->add_option("--id-column", command->id_column, "Generic tasks: id column");
  sub->add_option("--table-format", command->table_format, "Generic tasks: csv, tsv or jsonl (default: by extension)");
  sub->add_option("--split", command->split, "Translation: the split of a --data directory (SPLIT.LANG files)")
      ->capture_default_str();
  sub->add_option("--source-lang", command->source_lang, "Translation: source language (default: the checkpoint's)");
  sub->add_option("--target-lang", command->target_lang, "Translation: target language (default: the checkpoint's)");
  auto& search = command->translate.search;
  search.beam_size = 5;
  sub->add_option("--beam", search.beam_size, "Translation: beam size (1 = greedy)")->capture_default_str();
  sub->add_option("--lenpen", search.length_penalty, "Translation: length penalty (score / length^lenpen)")
      ->capture_default_str();
  sub->add_option("--min-len", search.min_length, "Translation: generated tokens before EOS, at least")
      ->capture_default_str();
  sub->add_option("--max-len-a", command->translate.max_len_a,
                  "Translation: at most a x (source length) + b tokens are generated")->capture_default_str();
  sub->add_option("--max-len-b", command->translate.max_len_b, "Translation: see --max-len-a")->capture_default_str();
  sub->add_option("--no-repeat-ngram", search.no_repeat_ngram, "Translation: never repeat an n-gram (0 = off)")
      ->capture_default_str();
  sub->add_option("--max-tokens", command->translate.max_tokens, "Translation: source tokens x beam per batch")
      ->capture_default_str();
  sub->add_option("--max-examples", command->max_examples, "Translation: only the first N pairs (0 = all)")
      ->capture_default_str();
  add_compute_flags(sub, command->compute);
  sub->add_option("--summarize", command->summarize,
                  "Merge metrics records (files or directories) into one table: models x tasks + GLUE score");
  sub->add_option("--format", command->format, "--summarize output: markdown, tsv or json")->capture_default_str();
  sub->add_option("--aggregate", command->aggregate,
                  "--summarize: several runs of a model/task -> mean (+- SEM), best, or mean-best "
                  "(mean +- SEM (best), the papers' layout)")
      ->capture_default_str();
  sub->add_flag("--glue-with-wnli", command->glue_with_wnli,
                "--summarize: include WNLI in the GLUE score (left out by default, as in BERT/ELECTRA/Chang et al.)");
  sub->callback([sub, command, threshold, label_column] {
    record_options(*sub);
    command->null_threshold_given = threshold->count() > 0;
    command->label_column_given = label_column->count() > 0;
    if (!command->summarize.empty()) {
      if (!command->model.empty()) throw UsageError("give either --summarize or --model, not both");
      run_summarize(*command);
      return;
    }
    command->model = train::resolve_checkpoint_argument(command->model, "--model");
    run_evaluate(*command);
  });
}

}  // namespace cabert::cmd
