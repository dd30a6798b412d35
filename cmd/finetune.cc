// cabert finetune: fine-tune an encoder on a GLUE task, SQuAD v1.1/v2.0 or a generic classification /
// regression set, or an encoder-decoder on a classification task as text-to-text (see lib/train/finetune.h
// for the protocol and the files written), or train an encoder-decoder on parallel text with --task
// translation (lib/train/translation_trainer.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "cmd/commands.h"
#include "cmd/compute_flags.h"
#include "cmd/distributed_flags.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/tasks/table.h"
#include "lib/train/finetune.h"
#include "lib/train/translation_trainer.h"

namespace cabert::cmd {

namespace {

struct FinetuneCommand {
  train::FinetuneOptions options;
  tasks::TaskSource source;
  std::string format;
  ComputeFlags compute;
  DistributedFlags distributed;
  bool no_header = false;
  // --task translation (the shared flags above are copied over in run_translation).
  train::TranslationTrainOptions translation;
};

void run_translation(FinetuneCommand& command, const CLI::App& sub) {
  const auto& o = command.options;
  const auto& s = command.source;
  auto& t = command.translation;
  auto given = [&](const char* flag) { return sub.count(flag) > 0; };
  // Text-to-text and encoder flags translation has its own form of (or none): refused, not ignored.
  for (const char* flag : {"--optimizer", "--lr-schedule"}) {
    if (given(flag)) {
      throw UsageError(str(flag, ": not for --task translation (Adam, fairseq's, with --schedule "
                           "inverse-sqrt, linear or cosine)"));
    }
  }
  t.init = o.init;
  t.preset = o.preset;
  t.set_overrides = o.set_overrides;
  t.tokenizer = o.tokenizer;
  t.model_dir = o.model_dir;
  t.name = o.name;
  t.tensorboard = o.tensorboard;
  if (!o.init_from_task.empty()) t.init = o.init_from_task;
  if (!s.train.empty()) {
    t.data = s.train;
  } else if (!s.data.empty()) {
    t.data = s.data.front();
  }
  if (!s.dev.empty()) t.dev = s.dev.front();
  if (s.data.size() > 1 && t.dev.empty()) t.dev = s.data[1];
  if (o.lr > 0) t.lr = o.lr;
  if (o.epochs > 0) t.epochs = o.epochs;
  if (given("--weight-decay")) t.weight_decay = o.weight_decay;
  if (given("--clip-norm")) t.clip_norm = o.clip_norm;
  t.max_skipped_updates = o.max_skipped_updates;
  t.log_every = o.log_every;
  t.patience = o.patience;
  if (o.max_length > 0) t.max_source_tokens = t.max_target_tokens = o.max_length;
  t.max_train_examples = o.max_train_examples;
  t.files.read.skip_bad_rows = s.skip_bad_rows;
  t.seed = o.seed;
  t.device = o.device;
  if (launch_if_requested(command.distributed)) return;
  std::unique_ptr<dist::Communicator> communicator = join_job(command.distributed, &t.device);
  t.communicator = communicator.get();
  train::TranslationTrainSummary summary = train::run_translation_training(t);
  if (!communicator->is_main()) return;
  std::printf("| epoch | dev BLEU | dev chrF | train loss |\n|---:|---:|---:|---:|\n");
  for (const auto& record : summary.epochs) {
    std::printf("| %u | %.2f | %.2f | %.4f |\n", record.epoch(), 100 * record.metrics().at("bleu"),
                100 * record.metrics().at("chrf"), record.train_loss());
  }
  if (summary.best.epoch() > 0) {
    std::printf("\n%s dev: best BLEU %.2f (epoch %u)\n", summary.best.task().c_str(), summary.best.score(),
                summary.best.epoch());
  }
  if (!summary.averaged_checkpoint.empty()) {
    std::printf("average of the last epochs: BLEU %.2f, %s\n", summary.averaged.score(),
                summary.averaged_checkpoint.c_str());
  }
  std::printf("checkpoint: %s\nmetrics: %s\n", summary.checkpoint.c_str(), summary.metrics_path.c_str());
}

void print_summary(const train::FinetuneSummary& summary, int runs) {
  std::printf("| run | task | epoch | score | metrics |\n|---:|---|---:|---:|---|\n");
  for (const auto& record : summary.best_of_runs) {
    std::string metrics;
    std::map<std::string, double> sorted(record.metrics().begin(), record.metrics().end());
    for (const auto& [name, value] : sorted) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%s %.2f", name.c_str(), 100 * value);
      metrics += (metrics.empty() ? "" : ", ") + std::string(buffer);
    }
    std::printf("| %u | %s | %u | %.2f | %s |\n", record.run() + 1, record.task().c_str(), record.epoch(),
                record.score(), metrics.c_str());
  }
  std::printf("\n%s dev: best %.2f (run %zu)", summary.primary_task.c_str(), summary.best_score, summary.best_run + 1);
  if (runs > 1) std::printf(", mean %.2f +- %.2f (SEM over %d runs)", summary.primary.mean, summary.primary.sem, runs);
  std::printf("\ncheckpoint: %s\nmetrics: %s\n", summary.checkpoint.c_str(), summary.metrics_path.c_str());
}

// Where the run starts (a checkpoint or a preset) and the task and its files.
void add_start_and_data_flags(CLI::App* sub, FinetuneCommand* command) {
  auto& o = command->options;
  auto& s = command->source;
  sub->add_option("--init", o.init,
                  "Pre-training checkpoint whose encoder starts the run, or its model directory (newest checkpoint)");
  sub->add_option("--preset", o.preset, "Or: a preset name or .textproto, randomly initialised (no pre-training)");
  sub->add_option("--set", o.set_overrides, "Model config override a.b=value (repeatable)");
  sub->add_option("--init-from-task", o.init_from_task,
                  "Or: a fine-tuned checkpoint (e.g. MNLI) whose encoder starts the run, with a fresh head");
  sub->add_option("--tokenizer", o.tokenizer, "SentencePiece model (default: the checkpoint's; needed with --preset)");
  sub->add_option("--task", s.task,
                  "CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI, squad1.1, squad2.0, translation (an "
                  "encoder-decoder preset on parallel text), or any name for a generic CSV/TSV/JSONL task "
                  "(text-to-text: an input column and a target-text column, for encoder-decoders). An "
                  "encoder-decoder learns every classification task as text-to-text")
      ->required();
  sub->add_option("--data", s.data,
                  "Task directory (GLUE: train.tsv + dev.tsv; MNLI: dev_matched + dev_mismatched) or files: train "
                  "then dev");
  sub->add_option("--train", s.train, "Training file (overrides --data)");
  sub->add_option("--dev", s.dev, "Dev file(s) (overrides --data); the first ranks epochs and runs");
}

// The model directory, the optimisation and the evaluation.
void add_training_flags(CLI::App* sub, FinetuneCommand* command) {
  auto& o = command->options;
  sub->add_option("--model-dir", o.model_dir, "Output directory (best.cabert, last.cabert, metrics.cabert)")
      ->required();
  sub->add_option("--name", o.name, "Model name in metrics records (default: the model directory's name)");
  sub->add_option("--tensorboard", o.tensorboard,
                  "Also write the metrics records as TensorBoard event files into this directory (rank 0; a resumed "
                  "run continues the curves)");
  sub->add_option("--lr", o.lr,
                  "Peak learning rate (default: Chang et al. Table 5 for the task; 1e-3 with --optimizer adafactor)");
  sub->add_option("--epochs", o.epochs, "Epochs (default by task: 3; RTE/STS-B 10; MNLI/QQP 4; SQuAD 2)");
  sub->add_option("--batch-size", o.batch_size, "Batch size (default 32; MNLI/QQP 128)");
  sub->add_option("--warmup-ratio", o.warmup_ratio, "Fraction of the steps for linear warm-up")->capture_default_str();
  sub->add_option("--lr-schedule", o.lr_schedule,
                  "After the warm-up: linear (decay to 0 at the last step, BERT's) or constant (T5's fine-tuning)")
      ->capture_default_str();
  sub->add_option("--optimizer", o.optimizer,
                  "adamw, or adafactor (T5's: factored second moments, each step relative to its parameter's RMS, "
                  "no momentum; --lr is then the relative step, default T5's 1e-3; T5 fine-tunes with --lr-schedule "
                  "constant)")
      ->capture_default_str();
  sub->add_option("--weight-decay", o.weight_decay, "Decoupled weight decay (not on biases/LayerNorm)")
      ->capture_default_str();
  sub->add_option("--clip-norm", o.clip_norm, "Gradient clipping by global norm (0 = off)")->capture_default_str();
  sub->add_option("--max-skipped-updates", o.max_skipped_updates,
                  "A non-finite gradient norm skips the update; this many in a row stop the run")
      ->capture_default_str();
  sub->add_option("--log-every", o.log_every,
                  "Append the mean training loss of every N updates to metrics.cabert (0 = only per epoch)")
      ->capture_default_str();
  sub->add_option("--patience", o.patience,
                  "Stop after N epochs without a better dev score (the first dev file's; 0 = run every epoch)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--max-length", o.max_length, "Tokens per example (default 128; SQuAD 384; capped by the model)");
  sub->add_option("--runs", o.runs, "Fine-tune N seeds (--seed, --seed+1, ...): best and mean +- SEM")
      ->capture_default_str();
  sub->add_option("--eval-batch-size", o.eval_batch_size, "Batch size for dev evaluation")->capture_default_str();
  sub->add_option("--pooling", o.pooling,
                  "Encoders' classification/regression head input: cls ([CLS], BERT's) or mean (of the last layer)")
      ->capture_default_str();
  sub->add_option("--max-train-examples", o.max_train_examples,
                  "Use only the first N training examples (SQuAD: windows; 0 = all)")
      ->capture_default_str();
}

// SQuAD, generic tables and text-to-text labels.
void add_task_format_flags(CLI::App* sub, FinetuneCommand* command) {
  auto& o = command->options;
  auto& s = command->source;
  sub->add_option("--doc-stride", o.squad.doc_stride, "SQuAD: context tokens between window starts")
      ->capture_default_str();
  sub->add_option("--max-query-length", o.squad.max_query_length, "SQuAD: question tokens kept")->capture_default_str();
  sub->add_option("--max-answer-length", o.squad.max_answer_length, "SQuAD: longest answer in tokens")
      ->capture_default_str();
  sub->add_option("--n-best", o.squad.n_best, "SQuAD: start/end candidates per window")->capture_default_str();
  sub->add_option("--null-threshold", o.squad.null_threshold,
                  "SQuAD v2.0: answer 'no answer' when null score - best span score exceeds this")
      ->capture_default_str();
  sub->add_option("--text-column", s.table.text_column, "Generic tasks: column (or JSON key) of the text")
      ->capture_default_str();
  sub->add_option("--text-pair-column", s.table.text_pair_column, "Generic tasks: second text (sentence pairs)");
  sub->add_option("--label-column", s.table.label_column, "Generic tasks: label column")->capture_default_str();
  sub->add_option("--id-column", s.table.id_column, "Generic tasks: id column (default: the line number)");
  sub->add_option("--labels", s.labels, "Generic tasks: the label set in class order (default: from the train file)");
  sub->add_flag("--regression", s.regression, "Generic tasks: the label is a number (Pearson/Spearman)");
  sub->add_option("--format", command->format, "Generic tasks: csv, tsv or jsonl (default: by file extension)");
  sub->add_flag("--no-header", command->no_header, "Generic CSV/TSV: no header row; columns are 0-based indices");
  sub->add_flag("--skip-bad-rows", s.skip_bad_rows, "Skip malformed rows (counted) instead of stopping");
  sub->add_option("--label-text", o.label_texts,
                  "Encoder-decoders (text-to-text): the target text of a label, LABEL=TEXT (repeatable; defaults: "
                  "T5's, e.g. SST-2 0=negative 1=positive; generic tasks: the label itself)");
  sub->add_flag("--reinit-decoder", o.reinit_decoder,
                "Text-to-text from --init: draw the decoder afresh, keep the pre-trained encoder (an ablation)");
  sub->add_flag("--target-sentinel-prefix", o.target_sentinel_prefix,
                "Text-to-text: start every target with <extra_id_0>, as span corruption's targets (an ablation)");
}

// --task translation, and --resume for every task.
void add_translation_flags(CLI::App* sub, FinetuneCommand* command) {
  auto& t = command->translation;
  sub->add_option("--source-lang", t.files.source_lang, "Translation: source language suffix of SPLIT.LANG files")
      ->capture_default_str();
  sub->add_option("--target-lang", t.files.target_lang, "Translation: target language suffix")->capture_default_str();
  sub->add_option("--train-split", t.train_split, "Translation: training split in a --data directory")
      ->capture_default_str();
  sub->add_option("--dev-split", t.dev_split, "Translation: dev split in a --data directory (or --dev PAIRS.tsv)")
      ->capture_default_str();
  sub->add_option("--max-tokens", t.max_tokens,
                  "Translation: tokens per batch and process, counted as --count-tokens says (the joint batch: N x "
                  "this)")
      ->capture_default_str();
  sub->add_option("--count-tokens", t.count_tokens,
                  "Translation: padded-sum (rows x (longest source + longest target)) or longer-side (rows x the "
                  "longer side's padded length, as fairseq's --max-tokens counts)")
      ->capture_default_str();
  sub->add_option("--schedule", t.schedule,
                  "Translation: inverse-sqrt, linear (decay to 0) or cosine (fairseq's, t_mult 1)")
      ->capture_default_str();
  sub->add_option("--lr-period-updates", t.lr_period_updates,
                  "Translation, cosine: updates per period (0: every update after the warm-up)")
      ->capture_default_str();
  sub->add_option("--min-lr", t.min_lr, "Translation, cosine: the lowest learning rate")->capture_default_str();
  sub->add_option("--warmup-steps", t.warmup_steps, "Translation: warm-up updates (-1: min(4000, half the updates), or what a resumed run recorded)")
      ->capture_default_str();
  sub->add_option("--label-smoothing", t.label_smoothing,
                  "Encoder-decoders: epsilon (translation: default the config's, 0.1; text-to-text: default 0)");
  sub->add_option("--average-last", t.average_last, "Translation: average the last N epochs' parameters")
      ->capture_default_str();
  sub->add_option("--dev-beam", t.dev_beam, "Translation: beam for the dev BLEU of every epoch (1 = greedy)")
      ->capture_default_str();
  sub->add_option("--max-dev-examples", t.max_dev_examples, "Translation: score only the first N dev pairs (0 = all)")
      ->capture_default_str();
  sub->add_flag("--resume", t.resume, "Continue a stopped run from MODEL_DIR/last.cabert (from scratch without one)");
  sub->add_flag("--allow-changed-options", t.allow_changed_options,
                "With --resume: continue although options differ from the checkpoint's");
}

}  // namespace

void add_finetune(CLI::App& app) {
  auto command = std::make_shared<FinetuneCommand>();
  CLI::App* sub = app.add_subcommand(
      "finetune", "Fine-tune on GLUE, SQuAD or a generic classification/regression set (Chang et al. protocol)");
  add_start_and_data_flags(sub, command.get());
  add_training_flags(sub, command.get());
  add_task_format_flags(sub, command.get());
  add_translation_flags(sub, command.get());
  add_compute_flags(sub, command->compute);
  add_distributed_flags(sub, command->distributed);
  sub->callback([sub, command] {
    record_options(*sub);
    command->options.init = io::resolve_checkpoint_argument(command->options.init, "--init");
    command->options.init_from_task =
        io::resolve_checkpoint_argument(command->options.init_from_task, "--init-from-task");
    auto& options = command->options;
    auto& source = command->source;
    options.device = apply_compute_flags(command->compute);
    if (!command->format.empty()) {
      source.table.format = tasks::parse_table_format(command->format);
      source.format_given = true;
    }
    source.table.header = !command->no_header;
    options.seed = global_options().seed;
    if (source.task == "translation") {
      run_translation(*command, *sub);
      return;
    }
    options.resume = command->translation.resume;
    options.allow_changed_options = command->translation.allow_changed_options;
    if (launch_if_requested(command->distributed)) return;
    std::unique_ptr<dist::Communicator> communicator = join_job(command->distributed, &options.device);
    options.communicator = communicator.get();
    options.label_smoothing = std::max(0.0, command->translation.label_smoothing);
    train::FinetuneSummary summary = train::run_finetune(options, source);
    if (communicator->is_main()) print_summary(summary, options.runs);
  });
}

}  // namespace cabert::cmd
