// cabert evaluate: score a fine-tuned checkpoint on task files (metrics record, printed table, per-example
// predictions, GLUE submission TSVs, SQuAD prediction JSON), or merge metrics records into the papers' table.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cmd/commands.h"
#include "cmd/compute_flags.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/eval/evaluate_checkpoint.h"
#include "lib/eval/summary.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/io/record_file.h"

namespace fs = std::filesystem;

namespace cabert::cmd {

namespace {

// The flags of a checkpoint's evaluation go straight into `evaluation`, but for those whose absence means "as the
// checkpoint has it", which the callback moves there only when given.
struct EvaluateCommand {
  eval::EvaluationOptions evaluation;  // output: with --summarize, the table
  ComputeFlags compute;
  double null_threshold = 0;
  std::string label_column;
  // --summarize
  std::vector<std::string> summarize;
  std::string format = "markdown", aggregate = "mean";
  bool glue_with_wnli = false;
};

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
  const std::string& output = command.evaluation.output;
  if (output.empty() || output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file_atomically(output, text);
  }
}

void print_translation_row(const eval::EvaluatedFile& row) {
  const pb::TaskMetrics& record = row.record;
  std::printf("| %s | %s | %zu | %.2f | %.2f | %s |\n", record.task().c_str(), record.data().c_str(),
              static_cast<size_t>(record.examples()), row.translation.bleu.score, row.translation.chrf.score,
              eval::format_bleu(row.translation.bleu).c_str());
}

void print_task_row(const eval::EvaluatedFile& row) {
  const pb::TaskMetrics& record = row.record;
  const auto examples = static_cast<size_t>(record.examples());
  if (!row.labeled) {
    std::printf("| %s | %s | %zu | - | unlabelled (test) file: predictions only |\n", record.task().c_str(),
                record.data().c_str(), examples);
    return;
  }
  std::string metrics;
  for (const auto& [metric, value] : row.metrics) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%s %.2f", metric.c_str(), 100 * value);
    metrics += (metrics.empty() ? "" : ", ") + std::string(buffer);
  }
  std::printf("| %s | %s | %zu | %.2f | %s |\n", record.task().c_str(), record.data().c_str(), examples, record.score(),
              metrics.c_str());
}

// Rows are printed as each file is scored; the records and predictions are written once all are.
void run_evaluate(eval::EvaluationOptions options, const ComputeFlags& compute) {
  if (options.checkpoint.empty()) throw UsageError("--model CKPT is required (or --summarize METRICS...)");
  if (options.data.empty()) throw UsageError("--data FILE is required");
  options.device = torch::Device(apply_compute_flags(compute));
  std::unique_ptr<eval::CheckpointEvaluation> evaluation = eval::open_evaluation(options);
  if (evaluation->translation()) {
    std::printf("| task | data | sentences | BLEU | chrF | details |\n|---|---|---:|---:|---:|---|\n");
  } else {
    std::printf("| task | data | examples | score | metrics |\n|---|---|---:|---:|---|\n");
  }
  for (size_t i = 0; i < evaluation->files(); ++i) {
    const eval::EvaluatedFile row = evaluation->evaluate(i);
    if (evaluation->translation()) {
      print_translation_row(row);
    } else {
      print_task_row(row);
    }
  }
  evaluation->finish();
}

}  // namespace

void add_evaluate(CLI::App& app) {
  auto command = std::make_shared<EvaluateCommand>();
  eval::EvaluationOptions& evaluation = command->evaluation;
  CLI::App* sub = app.add_subcommand(
      "evaluate", "Score a fine-tuned checkpoint (metrics, predictions, GLUE submissions) or --summarize metrics");
  sub->add_option("--model", evaluation.checkpoint,
                  "Fine-tuned checkpoint (best.cabert from `cabert finetune`), or its directory");
  sub->add_option("--task", evaluation.task,
                  "Task (default: the checkpoint's); an MNLI model can be scored on AX (diagnostic)");
  sub->add_option("--data", evaluation.data, "Task file(s); a GLUE directory means its dev file(s)");
  sub->add_option("--tokenizer", evaluation.tokenizer, "SentencePiece model (default: the checkpoint's)");
  sub->add_option("-o,--output", evaluation.output,
                  "Metrics record file (evaluation); with --summarize, the table (default stdout)");
  sub->add_option("--predictions", evaluation.predictions,
                  "Per-example predictions: TSV (id, prediction, gold, scores); GLUE test files give the "
                  "submission TSV (index, prediction), SQuAD the {id: answer} JSON. A directory gets <TASK>.tsv. "
                  "Translation: the hypotheses, one line per source line (a directory gets <source stem>.<target "
                  "language>). Several --data files need a directory; all are written once every file is scored");
  sub->add_option("--name", evaluation.name, "Model name in the metrics record (default: the checkpoint's directory)");
  sub->add_option("--batch-size", evaluation.batch_size, "Evaluation batch size")->capture_default_str();
  auto* threshold = sub->add_option("--null-threshold", command->null_threshold,
                                    "SQuAD v2.0: override the checkpoint's null-score threshold");
  sub->add_flag("--skip-bad-rows", evaluation.skip_bad_rows, "Skip malformed rows instead of stopping");
  sub->add_option("--unmatched-label", evaluation.unmatched_label,
                  "Text-to-text models: the label a submission (unlabelled file) gets for an output that matches no "
                  "label text (default: such a submission is refused)");
  sub->add_option("--text-column", evaluation.text_column, "Generic tasks: text column (default: as fine-tuned)");
  sub->add_option("--text-pair-column", evaluation.text_pair_column, "Generic tasks: second text column");
  auto* label_column = sub->add_option("--label-column", command->label_column,
                                       "Generic tasks: label column; \"\" for an unlabelled file");
  sub->add_option("--id-column", evaluation.id_column, "Generic tasks: id column");
  sub->add_option("--table-format", evaluation.table_format,
                  "Generic tasks: csv, tsv or jsonl (default: by extension)");
  sub->add_option("--split", evaluation.split, "Translation: the split of a --data directory (SPLIT.LANG files)")
      ->capture_default_str();
  sub->add_option("--source-lang", evaluation.source_lang, "Translation: source language (default: the checkpoint's)");
  sub->add_option("--target-lang", evaluation.target_lang, "Translation: target language (default: the checkpoint's)");
  auto& search = evaluation.translate.search;
  search.beam_size = 5;
  sub->add_option("--beam", search.beam_size, "Translation: beam size (1 = greedy)")->capture_default_str();
  sub->add_option("--lenpen", search.length_penalty, "Translation: length penalty (score / length^lenpen)")
      ->capture_default_str();
  sub->add_option("--min-len", search.min_length, "Translation: generated tokens before EOS, at least")
      ->capture_default_str();
  sub->add_option("--max-len-a", evaluation.translate.max_len_a,
                  "Translation: at most a x (source length) + b tokens are generated")
      ->capture_default_str();
  sub->add_option("--max-len-b", evaluation.translate.max_len_b, "Translation: see --max-len-a")->capture_default_str();
  sub->add_option("--no-repeat-ngram", search.no_repeat_ngram, "Translation: never repeat an n-gram (0 = off)")
      ->capture_default_str();
  sub->add_option("--max-tokens", evaluation.translate.max_tokens, "Translation: source tokens x beam per batch")
      ->capture_default_str();
  sub->add_option("--max-examples", evaluation.max_examples, "Translation: only the first N pairs (0 = all)")
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
    eval::EvaluationOptions& evaluation = command->evaluation;
    if (threshold->count() > 0) evaluation.null_threshold = command->null_threshold;
    if (label_column->count() > 0) evaluation.label_column = command->label_column;
    if (!command->summarize.empty()) {
      if (!evaluation.checkpoint.empty()) throw UsageError("give either --summarize or --model, not both");
      run_summarize(*command);
      return;
    }
    evaluation.checkpoint = io::resolve_checkpoint_argument(evaluation.checkpoint, "--model");
    run_evaluate(evaluation, command->compute);
  });
}

}  // namespace cabert::cmd
