// The pre-training loop of `cabert pretrain`: MLM (BERT) or ELECTRA replaced-token detection of encoders, T5
// span corruption of encoder-decoders (Tay et al.), AdamW with
// warm-up + linear decay, clipping, accumulation, held-out evaluation, metrics records, atomic
// checkpoints (keep the last K), exact resume, graceful stop on SIGINT/SIGTERM; alone or data-parallel
// over c10d (every rank's data position and generators in the checkpoint, a signal on any rank stops all).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/train/pretraining_objectives.h"

namespace cabert::dist {
class Communicator;
}

namespace cabert::train {

struct PretrainOptions {
  pb::ModelConfig model;            // resolved config (vocab size is taken from the corpus when it says)
  std::vector<std::string> corpus;  // shard files
  std::string model_dir;
  std::string tensorboard;  // --tensorboard DIR: rank 0 also writes TensorBoard event files there
  Objective objective = Objective::kMlm;
  int64_t steps = 1000;       // total optimizer updates
  int64_t batch_size = 32;    // examples per micro-batch
  int64_t accumulate = 1;     // micro-batches per update
  double lr = 0;              // 0: 3e-4 small, 1e-4 base (MLM) / 2e-4 base (ELECTRA)
  int64_t warmup_steps = -1;  // -1: min(10000, steps / 10)
  double weight_decay = 0.01;
  double adam_eps = 1e-6;
  double clip_norm = 1.0;
  int64_t max_skipped_updates = 5;  // a non-finite gradient norm skips the update; this many in a row stop
  int64_t eval_every = 0;           // 0: only at the end
  int64_t eval_examples = 256;      // held out from the first shard
  int64_t save_every = 1000;        // 0: only at the end
  int64_t keep_checkpoints = 3;
  bool resume = false;
  bool allow_changed_options = false;  // --resume with options that differ from the checkpoint's
  std::string device = "cpu";
  bool amp = false;  // bfloat16 autocast (CPU or CUDA), see lib/ops/mixed_precision.h
  uint64_t seed = 42;
  bool quiet_progress = false;
  int64_t first_regular_id = 5;  // ids below are special: 5 + the tokenizer's sentinel count
  double noise_density = 0.15;   // span corruption (T5 / Tay et al.)
  double mean_noise_span_length = 3.0;
  std::function<void(int64_t step)> after_step;  // called after each update (tests, external monitors)
  // Called after the backward pass of `step`, before its gradients are checked (tests: poisoned gradients).
  std::function<void(int64_t step, const std::vector<torch::Tensor>& parameters)> before_update;
  // Data parallelism (lib/dist): nullptr or a world of 1 runs alone. Each rank reads its share of the
  // corpus; the joint batch is batch_size x accumulate x world size; rank 0 writes checkpoints and metrics.
  dist::Communicator* communicator = nullptr;
};

struct PretrainResult {
  int64_t steps_done = 0;  // this process
  int64_t final_step = 0;
  double last_loss = 0;
  double tokens_per_second = 0;  // mean over this process's steps
  std::map<std::string, double> last_eval;
  std::string last_checkpoint;
};

// Throws Interrupted after saving when a signal arrived, Error on a non-finite loss.
PretrainResult run_pretraining(const PretrainOptions& options);

// The module a config and objective pre-train (for --dry-run).
std::string describe_pretraining_model(const pb::ModelConfig& config, Objective objective);

}  // namespace cabert::train
