#include "lib/train/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <numeric>

#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/numbers.h"
#include "lib/core/progress.h"
#include "lib/dist/communicator.h"
#include "lib/eval/task_score.h"
#include "lib/io/record_file.h"
#include "lib/ops/mixed_precision.h"
#include "lib/train/checkpoint.h"
#include "lib/train/rank_states.h"
#include "lib/train/schedule.h"

namespace cabert::train {

UpdateStep::UpdateStep(torch::nn::Module& module, Optimizer& optimizer, torch::Device device, StepSettings settings,
                       dist::Communicator& communicator, int64_t updates_done)
    : optimizer_(optimizer),
      device_(device),
      settings_(std::move(settings)),
      communicator_(communicator),
      parameters_(module.parameters(true)),
      gradient_sync_(communicator.gradient_sync(parameters_)),
      guard_(settings_.job, settings_.unit, settings_.max_skipped_updates),
      updates_(updates_done) {
  if (settings_.accumulate < 1) throw UsageError("--accumulate: expected at least 1");
  if (!settings_.learning_rate) throw Error("internal: UpdateStep without a learning-rate schedule");
}

UpdateStep::~UpdateStep() = default;

void UpdateStep::backward(const torch::Tensor& loss, bool last_micro_batch) {
  // Earlier micro-batches accumulate locally; the last one's backward pass all-reduces the gradients.
  if (last_micro_batch) gradient_sync_->prepare(loss);
  try {
    loss.backward();
  } catch (const std::exception& error) {
    if (!communicator_.distributed()) throw;
    communicator_.fail("the gradient all-reduce", error);
  }
}

UpdateReport UpdateStep::run(StepLearner& learner) {
  const auto started = std::chrono::steady_clock::now();
  const int world = communicator_.world_size();
  UpdateReport report;
  report.update = updates_ + 1;
  report.lr = settings_.learning_rate(report.update);
  optimizer_.set_lr(report.lr);
  optimizer_.zero_grad();
  // The metric sums, and under kStepLoss this rank's part of the joint loss (the parts add up over the ranks):
  // on the device until the update's one read.
  static constexpr const char* kStepLoss = "step_loss";
  MetricSums sums;
  for (int micro = 0; micro < settings_.accumulate; ++micro) {
    MicroBatch batch;
    {
      ops::AutocastScope autocast(settings_.amp, device_);
      batch = learner.micro_batch(micro, settings_.accumulate);
    }
    sums.add(kStepLoss, batch.reported.defined() ? batch.reported : batch.loss.detach().to(torch::kDouble) / world);
    report.tokens += batch.tokens;
    backward(batch.loss, micro + 1 == settings_.accumulate);
    sums.add(batch.sums);
  }
  std::map<std::string, double> values = sums.read();
  const double loss = values[kStepLoss];
  values.erase(kStepLoss);
  // One all-reduce for what every rank must agree on before the update: a non-finite loss on any rank (a
  // non-finite micro-batch loss makes the sum non-finite), the joint loss, the token count and the metric sums
  // (every rank adds the same names, whether or not its batch produced them).
  for (const auto& name : learner.sum_names()) values.try_emplace(name, 0.0);
  std::vector<double> shared{std::isfinite(loss) ? 0.0 : 1.0, loss, static_cast<double>(report.tokens)};
  for (const auto& [name, value] : values) shared.push_back(value);
  communicator_.all_reduce_sum(shared, "the step's loss and metrics");
  report.loss = shared[1];
  if (shared[0] > 0) throw Error(settings_.non_finite_loss(report.loss, report.update, static_cast<int>(shared[0])));
  report.tokens = static_cast<int64_t>(shared[2]);
  size_t i = 3;
  for (auto& [name, value] : values) value = shared[i++];
  report.sums = std::move(values);
  if (settings_.before_update) settings_.before_update(report.update, parameters_);
  report.grad_norm = clip_gradients(parameters_, settings_.clip_norm);
  if (guard_.allow(report.grad_norm, report.update)) optimizer_.step();
  updates_ = report.update;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

int stop_signal(dist::Communicator& communicator) {
  const int here = interrupt_requested();
  if (!communicator.distributed()) return here;
  std::vector<double> stop{here != 0 ? 1.0 : 0.0};
  communicator.all_reduce_sum(stop, "the stop flag");
  return stop[0] > 0 ? (here != 0 ? here : SIGTERM) : 0;
}

RunClock::RunClock(double seconds_before) : before_(seconds_before), start_(std::chrono::steady_clock::now()) {}

double RunClock::seconds() const {
  return before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::vector<size_t> epoch_order(size_t count, uint64_t seed, int epoch, EpochOrder kind) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  for (int e = 1; e <= epoch; ++e) {
    if (kind == EpochOrder::kFresh) std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

EpochLoop::EpochLoop(EpochLearner& learner, UpdateStep& step, torch::nn::Module& module, Optimizer& optimizer,
                     EpochSettings settings, dist::Communicator& communicator)
    : learner_(learner),
      step_(step),
      module_(module),
      optimizer_(optimizer),
      settings_(std::move(settings)),
      communicator_(communicator) {
  position_.set_run(static_cast<uint32_t>(settings_.run));
  position_.set_epoch(1);
}

void EpochLoop::resume(const pb::TrainingPosition& position, std::vector<pb::TaskMetrics> carried) {
  position_ = position;
  // A translation last.cabert of an earlier version knew the best score, not its epoch: the carried record
  // with that score is the best (the latest of equals, as that version chose).
  const bool legacy_best = position_.best_epoch() == 0 && position_.best_score() >= 0;
  for (const auto& record : carried) {
    if (record.kind() != pb::TaskMetrics::EPOCH || record.run() != position_.run()) continue;
    if (legacy_best && record.score() >= position_.best_score()) position_.set_best_epoch(record.epoch());
  }
  best_.clear();
  for (const auto& record : carried) {
    if (record.kind() == pb::TaskMetrics::EPOCH && record.run() == position_.run() &&
        record.epoch() == position_.best_epoch() && position_.best_epoch() > 0) {
      best_.push_back(record);
    }
  }
}

void EpochLoop::append_train_record() {
  pb::TaskMetrics record = learner_.train_record();
  record.set_kind(pb::TaskMetrics::TRAIN);
  record.set_split("train");
  record.set_run(position_.run());
  record.set_seed(settings_.seed);
  record.set_epoch(position_.epoch());
  record.set_step(position_.update());
  record.set_train_loss(position_.interval_loss_sum() / static_cast<double>(position_.interval_updates()));
  record.set_seconds(settings_.seconds());
  settings_.append_metrics(record);
  position_.set_interval_loss_sum(0);
  position_.set_interval_updates(0);
}

void EpochLoop::train_epoch(const std::vector<size_t>& order) {
  const int64_t batches = learner_.batches_per_epoch();
  Progress progress(str(settings_.progress_title, " epoch ", position_.epoch(), "/", settings_.epochs), "steps",
                    static_cast<uint64_t>(batches));
  int64_t tokens = 0;
  const auto started = std::chrono::steady_clock::now();
  while (static_cast<int64_t>(position_.batch()) < batches) {
    learner_.select_batch(order, static_cast<int64_t>(position_.batch()));
    const UpdateReport report = step_.run(learner_);
    position_.set_update(static_cast<uint64_t>(report.update));
    position_.set_batch(position_.batch() + 1);
    position_.set_loss_sum(position_.loss_sum() + report.loss);
    position_.set_interval_loss_sum(position_.interval_loss_sum() + report.loss);
    position_.set_interval_updates(position_.interval_updates() + 1);
    if (settings_.log_every > 0 && report.update % settings_.log_every == 0) append_train_record();
    tokens += report.tokens;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char extra[128];
    std::snprintf(extra, sizeof extra, "loss %.4f, lr %.3g, %s tok/s",
                  position_.loss_sum() / static_cast<double>(position_.batch()), report.lr,
                  human_count(static_cast<double>(tokens) / std::max(seconds, 1e-9)).c_str());
    progress.update(position_.batch(), extra);
    epoch_tokens_per_second_ = static_cast<double>(tokens) / std::max(seconds, 1e-9);
    if (settings_.after_step) settings_.after_step(report.update);
    if (const int signal = stop_signal(communicator_); signal != 0) {
      save_last();
      log_info(settings_.job, ": stopped at epoch ", position_.epoch(), ", batch ", position_.batch(), " (update ",
               position_.update(), "); continue with --resume (", settings_.last_path, ")");
      throw Interrupted(signal);
    }
  }
  progress.finish(str("loss ", position_.loss_sum() / static_cast<double>(std::max<int64_t>(batches, 1))));
}

void EpochLoop::finish_epoch(EpochRunResult& result) {
  const int epoch = static_cast<int>(position_.epoch());
  const double train_loss =
      position_.loss_sum() / static_cast<double>(std::max<int64_t>(learner_.batches_per_epoch(), 1));
  std::vector<pb::TaskMetrics> records = learner_.evaluate_epoch(epoch, step_.updates(), train_loss);
  if (records.empty()) throw Error("internal: an epoch's evaluation gave no record");
  for (auto& record : records) {
    record.set_kind(pb::TaskMetrics::EPOCH);
    record.set_run(position_.run());
    record.set_seed(settings_.seed);
    record.set_epoch(static_cast<uint32_t>(epoch));
    record.set_step(position_.update());
    record.set_train_loss(train_loss);
    record.set_seconds(settings_.seconds());
    // The epoch's training speed (the loss's tokens per wall second; of the part since a resume when the
    // epoch was resumed): a timing, so it differs from run to run, unlike every other field here.
    (*record.mutable_metrics())["train_tokens_per_second"] = epoch_tokens_per_second_;
    settings_.append_metrics(record);
  }
  if (std::isnan(records.front().score())) {
    log_warning(settings_.job, ": the ", records.front().task(), " dev score of epoch ", epoch,
                " is NaN (a correlation of constant predictions?); it ranks below every number");
  }
  result.epochs.push_back(records.front());
  // The first epoch always counts, so that every run leaves a best checkpoint.
  if (position_.best_epoch() == 0 || eval::better_score(records.front().score(), position_.best_score())) {
    position_.set_best_epoch(static_cast<uint32_t>(epoch));
    position_.set_best_score(records.front().score());
    best_ = records;
    learner_.save_best(epoch, static_cast<int64_t>(position_.update()), records);
  }
  learner_.after_epoch(epoch, static_cast<int64_t>(position_.update()));
  // The next epoch starts from here: a --resume after this point replays nothing.
  position_.set_epoch(position_.epoch() + 1);
  position_.set_batch(0);
  position_.set_loss_sum(0);
  position_.set_interval_loss_sum(0);
  position_.set_interval_updates(0);
  save_last();
}

// Early stopping: `patience` whole epochs have passed since the best one. The best epoch and the next epoch
// are both in the position, so a resumed run stops where the uninterrupted one would have.
bool EpochLoop::out_of_patience() const {
  if (settings_.patience <= 0 || position_.best_epoch() == 0) return false;
  const int64_t last_epoch = static_cast<int64_t>(position_.epoch()) - 1;
  return last_epoch - static_cast<int64_t>(position_.best_epoch()) >= settings_.patience;
}

EpochRunResult EpochLoop::run() {
  EpochRunResult result;
  while (static_cast<int>(position_.epoch()) <= settings_.epochs) {
    if (out_of_patience()) {
      result.stopped_early = true;
      log_info(settings_.job, ": stopping after epoch ", position_.epoch() - 1, ": no better dev score in ",
               settings_.patience, " epochs since epoch ", position_.best_epoch(), " (--patience)");
      break;
    }
    train_epoch(
        epoch_order(learner_.order_size(), settings_.seed, static_cast<int>(position_.epoch()), settings_.order));
    finish_epoch(result);
  }
  result.best = best_;
  result.last_epoch = static_cast<int>(position_.epoch()) - 1;
  return result;
}

void EpochLoop::save_last() {
  const int epoch = static_cast<int>(position_.epoch());
  save_resume_checkpoint(settings_.last_path, learner_.checkpoint_info(epoch, static_cast<int64_t>(position_.update())),
                         position_, module_, optimizer_, communicator_, settings_.job);
}

void save_resume_checkpoint(const std::string& path, pb::CheckpointInfo info, const pb::TrainingPosition& position,
                            torch::nn::Module& module, const Optimizer& optimizer, dist::Communicator& communicator,
                            const std::string& job) {
  const NamedTensors weights = io::module_tensors(module, "model/");
  // Every rank holds the same weights, so every rank refuses alike.
  check_finite_weights(weights, job, str("at update ", position.update()));
  pb::RankState mine;
  mine.set_torch_rng_state(torch_cpu_rng_state());
  const std::vector<pb::RankState> states =
      gather_rank_states(communicator, mine, static_cast<int64_t>(position.update()));
  if (communicator.is_main()) {
    info.set_step(position.update());
    *info.mutable_position() = position;
    record_rank_states(states, communicator.world_size(), &info);
    NamedTensors tensors = weights;
    for (auto& [name, tensor] : optimizer.state()) tensors.emplace_back("optimizer/" + name, tensor);
    io::save_checkpoint(path, info, tensors);
  }
  communicator.barrier(str("saving ", path));  // no rank leaves before the file is there
}

namespace {

// The position of a translation last.cabert written before pb::TrainingPosition (its "resume_*" metadata).
pb::TrainingPosition legacy_translation_position(const io::Checkpoint& checkpoint) {
  const auto& m = checkpoint.info.metadata();
  auto entry = [&](const char* key) {
    auto found = m.find(key);
    if (found == m.end()) throw DataError(str(checkpoint.path, ": the checkpoint lacks the '", key, "' entry"));
    return std::make_pair(found->second, str(checkpoint.path, ": metadata '", key, "'"));
  };
  auto integer = [&](const char* key) {
    auto [text, where] = entry(key);
    return parse_integer(text, 0, std::numeric_limits<int64_t>::max(), where);
  };
  auto number = [&](const char* key) {
    auto [text, where] = entry(key);
    return parse_finite(text, where);
  };
  pb::TrainingPosition position;
  position.set_epoch(static_cast<uint32_t>(std::min<int64_t>(integer("resume_epoch"), 1 << 30)));
  position.set_batch(static_cast<uint64_t>(integer("resume_batch")));
  position.set_update(static_cast<uint64_t>(integer("resume_update")));
  position.set_loss_sum(number("resume_loss_sum"));
  // Marks the best as known by score alone (EpochLoop::resume finds its epoch among the carried records).
  position.set_best_score(number("best_bleu"));
  // Absent from the checkpoints of still earlier versions: the window then restarts at the resume.
  if (m.count("resume_interval_updates") > 0) {
    position.set_interval_updates(static_cast<uint64_t>(integer("resume_interval_updates")));
    position.set_interval_loss_sum(number("resume_interval_loss_sum"));
  }
  return position;
}

}  // namespace

pb::TrainingPosition resume_position(const io::Checkpoint& checkpoint) {
  if (checkpoint.info.has_position()) return checkpoint.info.position();
  if (checkpoint.info.metadata().count("resume_epoch") > 0) return legacy_translation_position(checkpoint);
  throw DataError(str(checkpoint.path, ": holds no training position (not a last.cabert that --resume continues)"));
}

pb::TrainingPosition restore_resume_checkpoint(const io::Checkpoint& checkpoint, torch::nn::Module& module,
                                               Optimizer& optimizer, const dist::Communicator& communicator) {
  const pb::TrainingPosition position = resume_position(checkpoint);
  const pb::CheckpointInfo& info = checkpoint.info;
  const int saved_world = std::max<int>(1, static_cast<int>(info.world_size()));
  if (saved_world != communicator.world_size()) {
    throw UsageError(str("--resume: ", checkpoint.path, " was written by a run of ", saved_world,
                         " process(es); resume it with ", saved_world, " (this run has ", communicator.world_size(),
                         "): every rank continues from its own generator state"));
  }
  io::restore_module(module, checkpoint, "model/", "");
  optimizer.load_state(io::tensors_with_prefix(checkpoint, "optimizer/"), checkpoint.path);
  set_torch_cpu_rng_state(communicator.distributed() ? info.ranks(communicator.rank()).torch_rng_state()
                                                     : info.torch_rng_state());
  return position;
}

std::vector<pb::TaskMetrics> records_before(const std::string& metrics_path, const pb::TrainingPosition& position) {
  std::vector<pb::TaskMetrics> kept;
  std::error_code error;
  if (!std::filesystem::exists(metrics_path, error)) return kept;
  io::RecordReader reader(metrics_path);
  reader.expect("cabert.pb.TaskMetrics");
  pb::TaskMetrics record;
  while (reader.next(&record)) {
    const bool earlier_run = record.run() < position.run();
    const bool this_run = record.run() == position.run();
    const bool epoch_done = record.kind() == pb::TaskMetrics::EPOCH && record.epoch() < position.epoch();
    const bool logged_before = record.kind() == pb::TaskMetrics::TRAIN && record.step() <= position.update();
    if (earlier_run || (this_run && (epoch_done || logged_before))) kept.push_back(record);
  }
  return kept;
}

}  // namespace cabert::train
