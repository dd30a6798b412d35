// The one training loop (fairseq's Trainer / task split): what every kind of training shares, so that a
// pre-training objective, an encoder's task head, a text-to-text learner and translation only build batches and
// compute their losses and metrics.
//
//   UpdateStep   one optimizer update: the schedule's learning rate, micro-batch accumulation under autocast
//                (--amp), the backward pass and the data-parallel gradient all-reduce, one all-reduce of what
//                every rank must agree on (a non-finite loss, the joint loss, token counts, metric sums),
//                clipping and the non-finite gradient guard.
//   stop_signal  after each update, whether SIGINT/SIGTERM reached any rank (every rank stops at that update).
//   EpochLoop    epochs over a fixed set of batches (fine-tuning, translation): the shuffled order, TRAIN
//                records every --log-every updates, the dev evaluation after each epoch, the best epoch, and
//                last.cabert (model, optimizer, generators and pb::TrainingPosition) written after every epoch
//                and when a signal stops the run, from which --resume continues exactly.
// Pre-training (pretrainer.cc) drives UpdateStep over its example stream with numbered checkpoints.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "formats/task.pb.h"
#include "lib/io/checkpoint_file.h"
#include "lib/train/metric_sums.h"
#include "lib/train/optimizer.h"
#include "lib/train/update_guard.h"

namespace cabert::dist {
class Communicator;
class GradientSync;
}  // namespace cabert::dist

namespace cabert::io {
class RecordWriter;
}  // namespace cabert::io

namespace cabert::train {

// One micro-batch of an update, as a learner computes it (under autocast when the run asks for it).
struct MicroBatch {
  torch::Tensor loss;  // backpropagated: this rank's share of the update's joint loss (scaled for accumulation)
  MetricSums sums;     // added over the update's micro-batches and over the ranks
  int64_t tokens = 0;  // counted for tokens/s, added likewise
  // This rank's part of the reported joint loss, in double (undefined: loss / world size).
  torch::Tensor reported;
};

class StepLearner {
 public:
  virtual ~StepLearner() = default;
  // Micro-batch `micro` (0-based) of the `accumulate` that make the coming update.
  virtual MicroBatch micro_batch(int micro, int accumulate) = 0;
  // Every sum name micro_batch may report, so that all ranks all-reduce one layout (empty: the sums are not
  // shared, a single process's).
  virtual std::vector<std::string> sum_names() const { return {}; }
};

struct StepSettings {
  std::string job = "train";  // prefixes messages: "pretrain", "finetune", "translation"
  std::string unit = "step";  // what messages call an update
  int accumulate = 1;
  bool amp = false;      // bfloat16 autocast (lib/ops/mixed_precision.h)
  double clip_norm = 0;  // 0: no clipping (the norm is still computed)
  int64_t max_skipped_updates = 5;
  std::function<double(int64_t update)> learning_rate;  // update is 1-based
  // The error text for a non-finite joint loss at `update`, `ranks` of the world's ranks having produced one.
  std::function<std::string(double loss, int64_t update, int ranks)> non_finite_loss;
  // Tests: after the backward pass of `update`, before its gradients are checked.
  std::function<void(int64_t update, const std::vector<torch::Tensor>& parameters)> before_update;
};

struct UpdateReport {
  int64_t update = 0;  // 1-based
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  int64_t tokens = 0;
  std::map<std::string, double> sums;
};

// Collective: the signal (SIGINT/SIGTERM) that reached this rank or any other since the run began, 0 for none,
// so that every rank stops after the same update.
int stop_signal(dist::Communicator& communicator);

class UpdateStep {
 public:
  // `updates_done`: the updates before this process's first (a resumed run's).
  UpdateStep(torch::nn::Module& module, Optimizer& optimizer, torch::Device device, StepSettings settings,
             dist::Communicator& communicator, int64_t updates_done = 0);
  ~UpdateStep();
  UpdateReport run(StepLearner& learner);
  int64_t updates() const { return updates_; }
  int64_t skipped() const { return guard_.skipped(); }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

 private:
  void backward(const torch::Tensor& loss, bool last_micro_batch);
  Optimizer& optimizer_;
  torch::Device device_;
  StepSettings settings_;
  dist::Communicator& communicator_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<dist::GradientSync> gradient_sync_;
  UpdateGuard guard_;
  int64_t updates_;
};

// The run's clock: a resumed run goes on from the seconds its earlier part had logged.
class RunClock {
 public:
  explicit RunClock(double seconds_before = 0);
  double seconds() const;

 private:
  double before_;
  std::chrono::steady_clock::time_point start_;
};

// The order in which an epoch visits `count` items, drawn from `seed` alone, so that a resumed run redraws
// it: kFresh shuffles 0..count-1 again every epoch (translation), kCarried shuffles the previous epoch's order
// (fine-tuning). Both draw the same generator, so the orders differ while their statistics do not; each is
// kept so that runs of earlier versions repeat bit for bit.
enum class EpochOrder { kFresh, kCarried };
std::vector<size_t> epoch_order(size_t count, uint64_t seed, int epoch, EpochOrder kind);

// What fine-tuning and translation plug into the EpochLoop.
class EpochLearner : public StepLearner {
 public:
  // The items an epoch orders (examples, or token-budget batches) and the updates they make.
  virtual size_t order_size() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // The coming update trains on batch `index` of `order`.
  virtual void select_batch(const std::vector<size_t>& order, int64_t index) = 0;
  // After an epoch: score the dev data, returning the EPOCH records (the first one ranks epochs).
  virtual std::vector<pb::TaskMetrics> evaluate_epoch(int epoch, int64_t update, double train_loss) = 0;
  // The checkpoint header of the model at `update`, in or after `epoch` (kind, task metadata); the loop adds
  // the position.
  virtual pb::CheckpointInfo checkpoint_info(int epoch, int64_t update) const = 0;
  // The best epoch so far: write its checkpoint (`records` are evaluate_epoch's).
  virtual void save_best(int epoch, int64_t update, const std::vector<pb::TaskMetrics>& records) = 0;
  // A TRAIN record's fields beyond the loop's (model, task, run, seed).
  virtual pb::TaskMetrics train_record() const = 0;
  // Called after every epoch, after save_best (translation: the epoch checkpoints it averages).
  virtual void after_epoch(int /*epoch*/, int64_t /*update*/) {}
};

struct EpochSettings {
  std::string job = "finetune";  // prefixes messages: "finetune", "translation"
  int epochs = 1;
  int run = 0;         // fine-tuning's --runs: this one (0-based); recorded in the position
  uint64_t seed = 42;  // the epoch orders' (and the run's)
  EpochOrder order = EpochOrder::kFresh;
  int64_t log_every = 10;      // a TRAIN record (mean loss of the interval) every this many updates; 0: none
  int patience = 0;            // stop after this many epochs without a better dev score (0: every epoch)
  std::string progress_title;  // "finetune SST-2", "translation"
  std::string last_path;       // last.cabert
  std::function<void(int64_t update)> after_step;  // tests
  std::function<void(const pb::TaskMetrics&)> append_metrics;
  std::function<double()> seconds;  // the run's clock, for the records
};

struct EpochRunResult {
  std::vector<pb::TaskMetrics> epochs;  // the EPOCH records of the epochs this call ran (first dev file's)
  std::vector<pb::TaskMetrics> best;    // the best epoch's records (also one carried from before a resume)
  int last_epoch = 0;                   // the last whole epoch
  bool stopped_early = false;           // --patience ended the run before its last epoch
};

class EpochLoop {
 public:
  EpochLoop(EpochLearner& learner, UpdateStep& step, torch::nn::Module& module, Optimizer& optimizer,
            EpochSettings settings, dist::Communicator& communicator);
  // Continue from a last.cabert's position (resume) with the best records carried over from the metrics.
  void resume(const pb::TrainingPosition& position, std::vector<pb::TaskMetrics> best_records);
  // Runs the remaining epochs; throws Interrupted after writing last.cabert when a signal arrived.
  EpochRunResult run();
  const pb::TrainingPosition& position() const { return position_; }

 private:
  void train_epoch(const std::vector<size_t>& order);
  void finish_epoch(EpochRunResult& result);
  void save_last();
  void append_train_record();
  bool out_of_patience() const;

  EpochLearner& learner_;
  UpdateStep& step_;
  torch::nn::Module& module_;
  Optimizer& optimizer_;
  EpochSettings settings_;
  dist::Communicator& communicator_;
  pb::TrainingPosition position_;
  std::vector<pb::TaskMetrics> best_;
  double epoch_tokens_per_second_ = 0;  // of the epoch train_epoch ran last
};

// last.cabert: `info` (the learner's header) with the position and every rank's generator state, the model's
// and the optimizer's tensors. Collective: every rank hands rank 0 its state; rank 0 alone writes.
// `job` names the run in the refusal of non-finite weights.
void save_resume_checkpoint(const std::string& path, pb::CheckpointInfo info, const pb::TrainingPosition& position,
                            torch::nn::Module& module, const Optimizer& optimizer, dist::Communicator& communicator,
                            const std::string& job);

// Restores the model, the optimizer and this rank's torch generator from a resume checkpoint; returns where
// the run stood. A translation last.cabert of an earlier version (its position in "resume_*" metadata) reads too.
pb::TrainingPosition restore_resume_checkpoint(const io::Checkpoint& checkpoint, torch::nn::Module& module,
                                               Optimizer& optimizer, const dist::Communicator& communicator);

// The position a resume checkpoint holds, without touching a model (what `--resume` checks first).
pb::TrainingPosition resume_position(const io::Checkpoint& checkpoint);

// The records of an earlier part of the run that a resumed run keeps: every record of the runs before
// position.run; of its run, the EPOCH records of the epochs before position.epoch and the TRAIN records up to
// position.update. Returns them in file order.
std::vector<pb::TaskMetrics> records_before(const std::string& metrics_path, const pb::TrainingPosition& position);

}  // namespace cabert::train
