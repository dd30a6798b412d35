// Fine-tuning (Chang et al. 2021 protocol): AdamW (or T5's Adafactor) with linear warm-up (10%) and decay, dev
// evaluation after every epoch, the best epoch kept as the checkpoint (written atomically), and --runs N seeds
// reported as best and mean +- standard error of the mean. An encoder gets a task head; an encoder-decoder (a
// seq2seq preset or a span-corruption checkpoint) learns classification tasks as text-to-text
// (text_to_text_learner.h).
//
// The runs go through the one training loop (training_loop.h), so a fine-tuning stopped by SIGINT/SIGTERM
// continues with --resume exactly, in the run and epoch it was in.
//
// Files in the model directory:
//   best.cabert        fine-tuned checkpoint (kind "finetune") of the best epoch of the best run
//   run-<k>/best.cabert  with --runs N > 1: each run's best checkpoint
//   last.cabert        model + optimizer + generators + position (run, epoch, batch) of the run in progress,
//                      written after every epoch and when a signal stops the run: `--resume` continues from it
//   metrics.cabert     TaskMetrics records: one EPOCH record per epoch and dev file, one BEST_OF_RUN per run
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "formats/task.pb.h"
#include "lib/eval/metrics.h"
#include "lib/models/task_model.h"
#include "lib/tasks/squad_features.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"

namespace cabert::dist {
class Communicator;
}

namespace cabert::train {

// Chang et al. Table 5: lr 3e-4 (1e-4 for QNLI and for base-size models), batch 32 (128 for MNLI/QQP),
// epochs 3 (10 for RTE/STS-B, 4 for MNLI/QQP). SQuAD: 2 epochs (ELECTRA's setting); generic tasks: 3.
struct TaskDefaults {
  double lr = 3e-4;
  int batch_size = 32;
  int epochs = 3;
};
TaskDefaults task_defaults(const std::string& task, int hidden_size);

struct FinetuneOptions {
  std::string init;    // pre-training checkpoint (its "model/encoder." tensors initialise the encoder)
  std::string preset;  // or: preset name / .textproto, randomly initialised
  std::vector<std::string> set_overrides;
  std::string init_from_task;  // or: a fine-tuned checkpoint (e.g. MNLI) whose encoder is reused, head fresh
  std::string tokenizer;       // required with --preset; else must match the checkpoint's
  std::string model_dir, name;
  std::string tensorboard;  // --tensorboard DIR: rank 0 also writes the metrics records as TensorBoard events
  double lr = 0;            // 0 = task default
  int epochs = 0, batch_size = 0;
  double warmup_ratio = 0.1, weight_decay = 0, clip_norm = 1.0;
  // The learning rate after the warm-up: "linear" decays to 0 at the last step (BERT's), "constant" stays at --lr
  // (T5's fine-tuning).
  std::string lr_schedule = "linear";
  // "adamw" or "adafactor" (T5's: factored second moments, each step relative to its parameter's RMS, no first
  // moment; --lr is then the relative step size).
  std::string optimizer = "adamw";
  int64_t max_skipped_updates = 5;  // a non-finite gradient norm skips the update; this many in a row stop
  int64_t log_every = 10;           // a TRAIN record (mean loss of the interval) every this many updates; 0 = none
  int patience = 0;                 // stop after this many epochs without a better dev score; 0 = every epoch
  int max_length = 0;               // 0 = 128 (384 for SQuAD), capped by a model with absolute positions
  int runs = 1;
  uint64_t seed = 42;
  int eval_batch_size = 64;
  uint64_t max_train_examples = 0;  // 0 = all
  std::string pooling = "cls";      // encoders' classification / regression head: cls or mean
  tasks::SquadOptions squad;
  std::string device = "cpu";
  // Encoder-decoders (text-to-text): LABEL=TEXT verbaliser overrides, label smoothing of the target loss.
  std::vector<std::string> label_texts;
  double label_smoothing = 0;
  bool reinit_decoder = false;          // text-to-text from --init: the decoder drawn afresh (an ablation)
  bool target_sentinel_prefix = false;  // text-to-text: <extra_id_0> starts every target (an ablation)
  bool resume = false;                 // continue from MODEL_DIR/last.cabert (from scratch when there is none)
  bool allow_changed_options = false;  // --resume with options that differ from the checkpoint's
  std::function<void(int64_t update)> after_step;  // tests: called after every optimizer update of a run
  // Data parallelism (lib/dist): nullptr or a world of 1 runs alone. Each update sees batch_size examples
  // per rank (batch_size x world size in all, the steps per epoch shrink accordingly); every rank
  // evaluates the dev sets, rank 0 alone writes checkpoints and metrics.
  dist::Communicator* communicator = nullptr;
};

struct FinetuneSummary {
  std::vector<pb::TaskMetrics> best_of_runs;  // one per run and dev file
  size_t best_run = 0;
  std::string checkpoint, metrics_path;
  std::string primary_task;  // the dev split runs are ranked by
  eval::MeanSem primary;     // over runs, percent
  double best_score = 0;
};

FinetuneSummary run_finetune(const FinetuneOptions& options, const tasks::TaskSource& source);

}  // namespace cabert::train
