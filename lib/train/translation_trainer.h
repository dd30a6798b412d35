// Training an encoder-decoder on parallel text (`cabert finetune --task translation`; Wu et al. 2019's
// protocol): from scratch (a preset) or from a checkpoint of an encoder-decoder, label-smoothed
// cross-entropy (the config's seq2seq.label_smoothing, 0.1), Adam (0.9, 0.98) with an inverse-sqrt or linear
// schedule, token-budget batches, and after every epoch the dev loss and the dev BLEU/chrF of generated
// translations; the best epoch by dev BLEU is kept. Data-parallel with --nproc N or torchrun (options.communicator).
//
// Files in the model directory:
//   best.cabert        the epoch with the best dev BLEU (kind "finetune", metadata task=translation)
//   last.cabert        model + optimizer + data position after the last finished step: `--resume` continues
//                      from it exactly (written at each epoch's end and when SIGINT/SIGTERM stops the run)
//   epoch-<k>.cabert   with --average-last N: the last N epochs' models
//   averaged.cabert    with --average-last N >= 2: their parameter average (Vaswani et al.), scored on dev
//   metrics.cabert     TaskMetrics: one EPOCH record per epoch (bleu, chrf), BEST_OF_RUN for the best
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/task.pb.h"
#include "lib/tasks/translation.h"

namespace cabert::dist {
class Communicator;
}

namespace cabert::train {

struct TranslationTrainOptions {
  std::string init;    // checkpoint of an encoder-decoder (all "model/" tensors start the run)
  std::string preset;  // or: a preset / .textproto with seq2seq, randomly initialised
  std::vector<std::string> set_overrides;
  std::string tokenizer;  // required with --preset; else must match the checkpoint's
  std::string model_dir, name;
  std::string tensorboard;  // --tensorboard DIR: the metrics records also as TensorBoard events
  std::string data;         // directory of SPLIT.LANG files, or a TSV of training pairs
  std::string train_split = "train", dev_split = "val";
  std::string dev;  // a TSV of dev pairs (else dev_split of `data`)
  tasks::TranslationFiles files;
  double lr = 5e-4;
  int epochs = 10;
  int64_t max_tokens = 4096, max_rows = 512;  // per batch: tokens counted as count_tokens says, rows
  std::string count_tokens = "padded-sum";    // or "longer-side" (fairseq's --max-tokens): data::TokenCount
  std::string schedule = "inverse-sqrt";      // or "linear", "cosine"
  int64_t lr_period_updates = 0;              // cosine: updates per period (0: the updates after the warm-up)
  double min_lr = 0;                          // cosine: the floor
  int64_t warmup_steps = -1;                  // -1: min(4000, half the updates); see translation_warmup
  double weight_decay = 1e-4, clip_norm = 0;
  int64_t max_skipped_updates = 5;  // a non-finite gradient norm skips the update; this many in a row stop
  int64_t log_every = 10;           // a TRAIN metrics record (mean loss) every this many updates; 0 = none
  int patience = 0;                 // stop after this many epochs without a better dev BLEU; 0 = every epoch
  double label_smoothing = -1;      // -1: the config's
  int max_source_tokens = 256, max_target_tokens = 256;
  int average_last = 0;                                   // average the last N epochs' parameters (0/1: off)
  int dev_beam = 1;                                       // dev translations: 1 = greedy
  uint64_t max_train_examples = 0, max_dev_examples = 0;  // 0 = all
  bool resume = false;
  bool allow_changed_options = false;  // --resume with options that differ from the checkpoint's
  uint64_t seed = 42;
  std::string device = "cpu";
  std::function<void(int64_t update)> after_step;  // tests: called after every optimizer update
  // Data parallelism (lib/dist): nullptr or a world of 1 runs alone. max_tokens and max_rows are per rank: the
  // joint batches are cut with world x max_tokens (x max_rows), as one process with that budget cuts them, and
  // each is split between the ranks by data::rank_share; the loss is the joint batch's per target token. Every
  // rank scores the dev set (the same weights give the same BLEU); rank 0 alone writes checkpoints and metrics.
  dist::Communicator* communicator = nullptr;
};

struct TranslationTrainSummary {
  std::vector<pb::TaskMetrics> epochs;  // one per epoch run by this call
  pb::TaskMetrics best, averaged;       // averaged: with --average-last >= 2
  std::string checkpoint, averaged_checkpoint, metrics_path;
};

TranslationTrainSummary run_translation_training(const TranslationTrainOptions& options);

}  // namespace cabert::train
