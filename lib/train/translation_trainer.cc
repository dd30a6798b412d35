#include "lib/train/translation_trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "lib/config/model_config_text.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/core/random.h"
#include "lib/dist/communicator.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/translation.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/io/tensorboard_metrics.h"
#include "lib/models/seq2seq_model.h"
#include "lib/ops/device.h"
#include "lib/train/checkpoint.h"
#include "lib/train/losses.h"
#include "lib/train/metrics_log.h"
#include "lib/train/model_directory.h"
#include "lib/train/optimizer.h"
#include "lib/train/resume_options.h"
#include "lib/train/schedule.h"
#include "lib/train/tensorboard_pictures.h"
#include "lib/train/training_loop.h"
#include "lib/train/update_guard.h"

namespace fs = std::filesystem;

namespace cabert::train {
namespace {

std::string model_name(const TranslationTrainOptions& options) {
  if (!options.name.empty()) return options.name;
  return fs::absolute(options.model_dir).lexically_normal().filename().string();
}

void check_options(const TranslationTrainOptions& options) {
  if (options.init.empty() == options.preset.empty()) {
    throw UsageError("translation: give exactly one of --init CKPT (an encoder-decoder checkpoint) or --preset NAME "
                     "(random initialisation, e.g. wu-lightconv-small)");
  }
  if (options.model_dir.empty()) throw UsageError("--model-dir is required");
  if (options.data.empty()) {
    throw UsageError("translation: --data DIR (SPLIT.LANG files) or --data PAIRS.tsv is required");
  }
  if (options.epochs < 1) throw UsageError(str("--epochs: expected at least 1, got ", options.epochs));
  if (options.schedule != "inverse-sqrt" && options.schedule != "linear" && options.schedule != "cosine") {
    throw UsageError(str("--schedule: expected inverse-sqrt, linear or cosine, got '", options.schedule, "'"));
  }
  if (options.count_tokens != "padded-sum" && options.count_tokens != "longer-side") {
    throw UsageError(str("--count-tokens: expected padded-sum or longer-side, got '", options.count_tokens, "'"));
  }
  if (options.lr_period_updates < 0) {
    throw UsageError(str("--lr-period-updates: expected 0 or more, got ", options.lr_period_updates));
  }
  if (!(options.min_lr >= 0 && options.min_lr <= options.lr)) {
    throw UsageError(str("--min-lr: expected a value in [0, --lr], got ", options.min_lr));
  }
  if (options.dev_beam < 1) throw UsageError(str("--dev-beam: expected >= 1, got ", options.dev_beam));
}

// The model config, the tokenizer and the checkpoint the run starts from.
struct ModelStart {
  io::Checkpoint init;
  pb::ModelConfig config;
  std::unique_ptr<text::Tokenizer> tokenizer;
  double smoothing = 0;
};

ModelStart resolve_model(const TranslationTrainOptions& options) {
  ModelStart start;
  if (!options.preset.empty()) {
    if (options.tokenizer.empty()) {
      throw UsageError("--preset needs --tokenizer MODEL (the joint SentencePiece model)");
    }
    start.config = config::load_model_config(options.preset, options.set_overrides);
  } else {
    start.init = io::load_checkpoint(options.init);
    start.config = start.init.info.model();
    for (const auto& assignment : options.set_overrides) config::apply_override(&start.config, assignment);
    config::validate_model_config(start.config);
  }
  if (!start.config.has_seq2seq()) {
    throw UsageError(str("translation needs an encoder-decoder; '", start.config.name(),
                         "' is an encoder (see the wu-*, tay-* and transformer-* presets in --list-presets)"));
  }
  start.tokenizer = std::make_unique<text::Tokenizer>(
      options.preset.empty() ? eval::open_checkpoint_tokenizer(start.init.info, start.init.path, options.tokenizer)
                             : text::Tokenizer(options.tokenizer));
  if (!options.preset.empty() && start.config.vocab_size() != start.tokenizer->vocab_size()) {
    log_info("translation: vocabulary size ", start.tokenizer->vocab_size(), " from ", start.tokenizer->path());
    start.config.set_vocab_size(start.tokenizer->vocab_size());
  }
  start.smoothing = options.label_smoothing >= 0 ? options.label_smoothing : start.config.seq2seq().label_smoothing();
  if (start.smoothing >= 1) throw UsageError(str("--label-smoothing: expected [0, 1), got ", start.smoothing));
  return start;
}

struct DevSet {
  std::vector<data::Seq2SeqExample> examples;
  std::vector<std::string> references;
  std::string path;
};

struct TranslationData {
  tasks::TranslationFiles files;
  std::string task_name;
  std::vector<data::Seq2SeqExample> train;
  std::vector<std::vector<size_t>> batches;  // token-budget batches of `train`
  DevSet dev;
};

TranslationData read_data(const TranslationTrainOptions& options, const text::Tokenizer& tokenizer, int world) {
  TranslationData data;
  data.files = options.files;
  data.files.read.max_pairs = options.max_train_examples;
  tasks::ParallelData train_pairs = tasks::read_translation_split(options.data, options.train_split, data.files);
  if (train_pairs.pairs.empty()) throw DataError(str(train_pairs.source_path, ": expected training pairs, got none"));
  tasks::EncodeStats stats;
  data.train =
      tasks::encode_pairs(train_pairs, tokenizer, options.max_source_tokens, options.max_target_tokens, &stats);
  data.files.read.max_pairs = options.max_dev_examples;
  tasks::ParallelData dev_pairs = options.dev.empty()
                                      ? tasks::read_translation_split(options.data, options.dev_split, data.files)
                                      : tasks::read_translation_split(options.dev, "", data.files);
  if (dev_pairs.pairs.empty()) throw DataError(str(dev_pairs.source_path, ": expected dev pairs, got none"));
  data.dev.path = dev_pairs.source_path;
  data.dev.examples = tasks::encode_pairs(dev_pairs, tokenizer, options.max_source_tokens, options.max_target_tokens);
  for (const auto& pair : dev_pairs.pairs) data.dev.references.push_back(pair.target);
  if (stats.truncated_sources + stats.truncated_targets > 0) {
    log_info("translation: truncated ", stats.truncated_sources, " sources and ", stats.truncated_targets,
             " targets to ", options.max_source_tokens, "/", options.max_target_tokens, " tokens");
  }
  // The joint batches of `world` ranks: those one process with the joint budget cuts (docs/training.md).
  const data::TokenCount count =
      options.count_tokens == "longer-side" ? data::TokenCount::kPaddedLonger : data::TokenCount::kPaddedSum;
  data.batches = data::token_budget_batches(data.train, options.max_tokens * world, options.max_rows * world, count);
  data.task_name = tasks::translation_task_name(data.files);
  return data;
}

struct DevResult {
  double nll_per_token = 0;
  eval::TranslationScores scores;
};

DevResult evaluate_dev(models::Seq2SeqModel& model, const DevSet& dev, const text::Tokenizer& tokenizer,
                       torch::Device device, int beam, int64_t max_tokens) {
  DevResult result;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    double nll = 0;
    int64_t tokens = 0;
    for (const auto& rows : data::token_budget_batches(dev.examples, max_tokens, 512)) {
      data::Seq2SeqBatch batch = data::make_seq2seq_batch(dev.examples, rows);
      torch::Tensor logits = model->forward(batch.source.to(device), batch.source_mask.to(device),
                                            batch.target_in.to(device), batch.target_mask.to(device));
      nll += label_smoothed_cross_entropy(logits, batch.target_out.to(device), 0.0).nll.item<double>();
      tokens += batch.target_tokens;
    }
    result.nll_per_token = nll / std::max<int64_t>(tokens, 1);
  }
  eval::TranslateOptions translate;
  translate.search.beam_size = beam;
  translate.device = device;
  std::vector<std::string> hypotheses = eval::translate_examples(model, dev.examples, tokenizer, translate);
  result.scores = eval::score_translations(hypotheses, dev.references);
  model->train();
  return result;
}

// The parameter-wise mean of checkpoints of the same model (buffers and integer tensors from the last one).
io::NamedTensors average_checkpoints(const std::vector<std::string>& paths) {
  std::map<std::string, torch::Tensor> sum;
  io::Checkpoint last;
  for (const auto& path : paths) {
    last = io::load_checkpoint(path);
    for (const auto& [name, tensor] : last.tensors) {
      if (!tensor.is_floating_point()) continue;
      auto found = sum.find(name);
      if (found == sum.end()) {
        sum[name] = tensor.to(torch::kDouble);
      } else {
        found->second += tensor.to(torch::kDouble);
      }
    }
  }
  io::NamedTensors averaged;
  for (const auto& [name, tensor] : last.tensors) {
    auto found = sum.find(name);
    averaged.emplace_back(name, found == sum.end()
                                    ? tensor
                                    : (found->second / static_cast<double>(paths.size())).to(tensor.scalar_type()));
  }
  return averaged;
}

// Translation in the EpochLoop: label-smoothed cross-entropy per target token of one token-budget batch an
// update; the dev BLEU ranks the epochs; --average-last keeps the last epochs' models.
class TranslationLearner : public EpochLearner {
 public:
  TranslationLearner(const TranslationTrainOptions& options, const ModelStart& start, const TranslationData& data,
                     models::Seq2SeqModel& model, torch::Device device, const dist::Communicator& communicator,
                     int64_t warmup_updates)
      : options_(options),
        start_(start),
        data_(data),
        model_(model),
        device_(device),
        communicator_(communicator),
        name_(model_name(options)),
        warmup_updates_(warmup_updates) {
    best_path_ = (fs::path(options.model_dir) / "best.cabert").string();
  }

  size_t order_size() const override { return data_.batches.size(); }
  int64_t batches_per_epoch() const override { return static_cast<int64_t>(data_.batches.size()); }
  void select_batch(const std::vector<size_t>& order, int64_t index) override {
    batch_ = order[static_cast<size_t>(index)];
  }

  // This rank's share of the joint batch; the loss is summed over its target tokens and divided by the joint
  // batch's, times the world size (the gradient all-reduce averages over the ranks), so that the update is
  // the one of a single process holding the joint batch.
  MicroBatch micro_batch(int /*micro*/, int /*accumulate*/) override {
    const std::vector<size_t>& joint = data_.batches[batch_];
    const int world = communicator_.world_size();
    const std::vector<size_t> rows = world > 1 ? data::rank_share(joint, communicator_.rank(), world) : joint;
    const bool empty = rows.empty();  // a joint batch of fewer rows than ranks
    data::Seq2SeqBatch batch = data::make_seq2seq_batch(data_.train, empty ? std::vector<size_t>{joint[0]} : rows);
    torch::Tensor logits = model_->forward(batch.source.to(device_), batch.source_mask.to(device_),
                                           batch.target_in.to(device_), batch.target_mask.to(device_));
    SmoothedLoss loss = label_smoothed_cross_entropy(logits, batch.target_out.to(device_), start_.smoothing);
    if (empty) loss.loss = loss.loss * 0.0;
    MicroBatch out;
    const double target_tokens = static_cast<double>(data::target_tokens(data_.train, joint));
    out.loss = loss.loss / target_tokens;
    if (world > 1) out.loss = out.loss * static_cast<double>(world);
    // Reported as the summed loss over the joint batch's target tokens, divided in double (summed over ranks).
    out.reported = loss.loss.detach().to(torch::kDouble) / target_tokens;
    out.tokens = empty ? 0 : batch.source_tokens + batch.target_tokens;
    return out;
  }

  std::vector<pb::TaskMetrics> evaluate_epoch(int epoch, int64_t /*update*/, double /*train_loss*/) override {
    DevResult result =
        evaluate_dev(model_, data_.dev, *start_.tokenizer, device_, options_.dev_beam, options_.max_tokens);
    log_info("translation: epoch ", epoch, " dev: nll/token ", result.nll_per_token, ", ",
             eval::format_bleu(result.scores.bleu), ", ", eval::format_chrf(result.scores.chrf));
    check_finite_weights(io::module_tensors(*model_, "model/"), "translation", str("after epoch ", epoch));
    return {dev_record(result, best_path_)};
  }

  pb::TaskMetrics dev_record(const DevResult& result, const std::string& checkpoint) const {
    pb::TaskMetrics record;
    record.set_model(name_);
    record.set_task(data_.task_name);
    record.set_split("dev");
    record.set_data(data_.dev.path);
    record.set_examples(data_.dev.examples.size());
    (*record.mutable_metrics())["bleu"] = result.scores.bleu.score / 100;
    (*record.mutable_metrics())["chrf"] = result.scores.chrf.score / 100;
    record.set_score(result.scores.bleu.score);
    record.set_checkpoint(fs::absolute(checkpoint).lexically_normal().string());
    record.set_seed(options_.seed);
    return record;
  }

  pb::CheckpointInfo checkpoint_info(int epoch, int64_t update) const override {
    pb::CheckpointInfo info = fine_tuned_info(start_.config, *start_.tokenizer, update);
    auto& m = *info.mutable_metadata();
    m["task"] = "translation";
    m["task_name"] = data_.task_name;
    m["source_lang"] = data_.files.source_lang;
    m["target_lang"] = data_.files.target_lang;
    m["max_source_tokens"] = std::to_string(options_.max_source_tokens);
    m["max_target_tokens"] = std::to_string(options_.max_target_tokens);
    m["epoch"] = std::to_string(epoch);
    m["warmup_updates"] = std::to_string(warmup_updates_);
    m["initialised_from"] = options_.preset.empty() ? start_.init.path : "random (" + options_.preset + ")";
    return info;
  }

  void save_best(int epoch, int64_t update, const std::vector<pb::TaskMetrics>& records) override {
    pb::CheckpointInfo info = checkpoint_info(epoch, update);
    (*info.mutable_metadata())["dev_bleu"] = str(records.front().score());
    if (!communicator_.is_main()) return;
    io::save_checkpoint(best_path_, info, io::module_tensors(*model_, "model/"));
    log_info("translation: best so far, saved ", best_path_);
  }

  void after_epoch(int epoch, int64_t update) override {
    if (options_.average_last < 2) return;
    const std::string path = epoch_checkpoint(epoch);
    if (communicator_.is_main()) {
      io::save_checkpoint(path, checkpoint_info(epoch, update), io::module_tensors(*model_, "model/"));
    }
    epoch_checkpoints_.push_back(path);
    while (epoch_checkpoints_.size() > static_cast<size_t>(options_.average_last)) {
      if (communicator_.is_main()) fs::remove(epoch_checkpoints_.front());
      epoch_checkpoints_.erase(epoch_checkpoints_.begin());
    }
  }

  pb::TaskMetrics train_record() const override {
    pb::TaskMetrics record;
    record.set_model(name_);
    record.set_task(data_.task_name);
    return record;
  }

  // A resumed run averages the epochs before the stop too, as the uninterrupted run would: they are on disk.
  void carry_epoch_checkpoints(int next_epoch) {
    if (options_.average_last < 2) return;
    for (int epoch = std::max(1, next_epoch - options_.average_last); epoch < next_epoch; ++epoch) {
      if (fs::exists(epoch_checkpoint(epoch))) {
        epoch_checkpoints_.push_back(epoch_checkpoint(epoch));
      } else {
        log_warning("translation: --resume: ", epoch_checkpoint(epoch), " is gone; the average of the last ",
                    options_.average_last, " epochs will lack epoch ", epoch);
      }
    }
  }

  const std::vector<std::string>& epoch_checkpoints() const { return epoch_checkpoints_; }

 private:
  std::string epoch_checkpoint(int epoch) const {
    return (fs::path(options_.model_dir) / str("epoch-", epoch, ".cabert")).string();
  }

  const TranslationTrainOptions& options_;
  const ModelStart& start_;
  const TranslationData& data_;
  models::Seq2SeqModel& model_;
  torch::Device device_;
  const dist::Communicator& communicator_;
  std::string name_, best_path_;
  int64_t warmup_updates_;
  size_t batch_ = 0;
  std::vector<std::string> epoch_checkpoints_;
};

// --average-last N >= 2: the parameter average of the last epochs, scored on dev.
pb::TaskMetrics write_average(const TranslationTrainOptions& options, TranslationLearner& learner,
                              const TranslationData& data, const ModelStart& start, int last_epoch, int64_t update,
                              torch::Device device, std::string* path) {
  *path = (fs::path(options.model_dir) / "averaged.cabert").string();
  pb::CheckpointInfo info = learner.checkpoint_info(last_epoch, update);
  (*info.mutable_metadata())["averaged"] = std::to_string(learner.epoch_checkpoints().size()) + " epochs";
  io::save_checkpoint(*path, info, average_checkpoints(learner.epoch_checkpoints()));
  eval::LoadedSeq2SeqModel averaged = eval::load_seq2seq_model(*path, device);
  DevResult result =
      evaluate_dev(averaged.model, data.dev, *start.tokenizer, device, options.dev_beam, options.max_tokens);
  log_info("translation: average of the last ", learner.epoch_checkpoints().size(),
           " epochs, dev: ", eval::format_bleu(result.scores.bleu), ", ", eval::format_chrf(result.scores.chrf));
  pb::TaskMetrics record = learner.dev_record(result, *path);
  record.set_kind(pb::TaskMetrics::EVALUATION);
  record.set_epoch(static_cast<uint32_t>(last_epoch));
  record.set_step(static_cast<uint64_t>(update));
  return record;
}

// The model directory, before anything is read: another kind of run, an earlier translation fine-tuning that
// only --resume continues, or the checkpoint this run starts from (it would be written over) are refused.
bool check_model_directory(const TranslationTrainOptions& options, const std::string& init_path,
                           const std::string& last_path) {
  refuse_other_run(options.model_dir, DirectoryRun::kTranslation);
  const bool resuming = options.resume && fs::exists(last_path);
  if (!resuming) {
    const std::vector<fs::path> earlier = translation_checkpoints(options.model_dir);
    if (!options.resume) refuse_fresh_start(options.model_dir, earlier);
    refuse_start_among_outputs(options.model_dir, DirectoryRun::kTranslation, init_path, earlier);
  }
  return resuming;
}

// last.cabert's model, optimizer and generator, after checking that it is this run's; returns its position.
pb::TrainingPosition restore_last(const TranslationTrainOptions& options, const ModelStart& start,
                                  const std::string& last_path, int64_t steps_per_epoch, models::Seq2SeqModel& model,
                                  Optimizer& optimizer, const dist::Communicator& communicator) {
  io::Checkpoint last = io::load_checkpoint(last_path);
  eval::check_tokenizer_matches(*start.tokenizer, last.info, last_path);
  if (last.info.model().SerializeAsString() != start.config.SerializeAsString()) {
    throw UsageError(str("--resume: ", last_path, " holds another model config; resume with the same --preset/--set"));
  }
  const pb::TrainingPosition position = restore_resume_checkpoint(last, *model, optimizer, communicator);
  check_resume_options(last_path, options.allow_changed_options,
                       static_cast<int>(position.epoch()) > options.epochs ||
                           (static_cast<int>(position.epoch()) == options.epochs &&
                            static_cast<int64_t>(position.batch()) >= steps_per_epoch));
  log_info("translation: resuming from ", last_path, " at epoch ", position.epoch(), ", batch ", position.batch(),
           " (update ", position.update(), ")");
  return position;
}

// The warm-up that last.cabert recorded; -1 where it records none (a checkpoint of an older cabert).
int64_t recorded_warmup(const std::string& last_path) {
  const pb::CheckpointInfo info = io::read_checkpoint_info(last_path);
  const auto found = info.metadata().find("warmup_updates");
  if (found == info.metadata().end()) return -1;
  try {
    return std::stoll(found->second);
  } catch (const std::exception&) {
    throw DataError(str(last_path, ": metadata warmup_updates is '", found->second, "'; expected a whole number"));
  }
}

// Every rank starts from rank 0's weights; dropout then draws differently on each rank.
void share_initial_weights(models::Seq2SeqModel& model, dist::Communicator& communicator, uint64_t seed) {
  if (!communicator.distributed()) return;
  std::vector<torch::Tensor> state = model->parameters(true);
  for (auto& buffer : model->buffers(true)) state.push_back(buffer);
  communicator.broadcast(state, "the initial parameters");
  if (!communicator.is_main()) torch::manual_seed(mix_seed(seed, static_cast<uint64_t>(communicator.rank())));
}

}  // namespace

TranslationTrainSummary run_translation_training(const TranslationTrainOptions& options) {
  check_options(options);
  dist::Communicator single;
  dist::Communicator& communicator = options.communicator != nullptr ? *options.communicator : single;
  const bool main_rank = communicator.is_main();
  const int world = communicator.world_size();
  torch::Device device = ops::select_device(options.device);
  const ModelStart start = resolve_model(options);
  const std::string last_path = (fs::path(options.model_dir) / "last.cabert").string();
  const bool resuming = check_model_directory(options, start.init.path, last_path);
  // No rank writes before every rank has looked at the model directory as it was.
  communicator.barrier("checking the model directory");
  const TranslationData data = read_data(options, *start.tokenizer, world);
  const int64_t steps_per_epoch = static_cast<int64_t>(data.batches.size());
  const int64_t total_steps = steps_per_epoch * options.epochs;
  const Warmup warmup_choice =
      translation_warmup(options.warmup_steps, total_steps, resuming ? recorded_warmup(last_path) : -1, resuming);
  const int64_t warmup = warmup_choice.updates;
  log_info("translation: ", data.task_name, ", ", data.train.size(), " training pairs in ", steps_per_epoch,
           " batches of <= ", options.max_tokens, " tokens (", options.count_tokens, ")",
           world > 1 ? str(" x ", world, " processes") : "", ", dev ", data.dev.examples.size(), "; lr ", options.lr,
           " (", options.schedule, ", warm-up ", warmup, " of ", total_steps, " updates: ", warmup_choice.rule,
           "), label smoothing ", start.smoothing, ", ", options.epochs, " epochs");

  create_output_directory(options.model_dir, "--model-dir");
  // --resume without last.cabert starts from scratch: what an earlier start left (a best or epoch checkpoint
  // from before its first last.cabert) is not this run's.
  if (!resuming && main_rank) {
    remove_earlier_outputs(options.model_dir, DirectoryRun::kTranslation, translation_checkpoints(options.model_dir));
  }
  torch::manual_seed(options.seed);
  models::Seq2SeqModel model(start.config);
  if (!options.init.empty()) io::restore_module(*model, start.init, "model/", "");
  model->to(device);
  model->train();
  share_initial_weights(model, communicator, options.seed);
  AdamWOptions adam;
  adam.lr = options.lr;
  adam.beta2 = 0.98;
  adam.eps = 1e-8;
  adam.weight_decay = options.weight_decay;
  AdamW optimizer(*model, adam);
  pb::TrainingPosition position;
  position.set_epoch(1);
  if (resuming) {
    position = restore_last(options, start, last_path, steps_per_epoch, model, optimizer, communicator);
  } else if (options.resume) {
    log_info("translation: --resume: no ", last_path, ", starting from scratch");
  }

  TranslationTrainSummary summary;
  summary.checkpoint = (fs::path(options.model_dir) / "best.cabert").string();
  summary.metrics_path = (fs::path(options.model_dir) / "metrics.cabert").string();
  // A resumed run keeps the records of the epochs (and training intervals) before it (every rank's loop reads
  // them), and its clock goes on from theirs. Rank 0's: the metrics file and the TensorBoard events.
  const std::vector<pb::TaskMetrics> carried =
      position.update() > 0 ? records_before(summary.metrics_path, position) : std::vector<pb::TaskMetrics>{};
  std::unique_ptr<TaskMetricsLog> metrics;
  if (main_rank) {
    TaskMetricsLogOptions log_options;
    log_options.metadata = {{"task", data.task_name},
                            {"model", model_name(options)},
                            {"peak_lr", str(options.lr)},
                            {"schedule", options.schedule},
                            {"warmup_updates", std::to_string(warmup)},
                            {"warmup_rule", warmup_choice.rule},
                            {"total_updates", std::to_string(total_steps)}};
    log_options.carried = carried;
    log_options.tensorboard_dir = options.tensorboard;
    log_options.resume_step = resuming ? static_cast<int64_t>(position.update()) : -1;
    metrics = std::make_unique<TaskMetricsLog>(summary.metrics_path, start.config, log_options);
  }
  const RunClock clock(metrics ? metrics->seconds_before() : 0);
  auto append_metrics = [&](const pb::TaskMetrics& record) {
    if (!main_rank) return;
    metrics->add(record);
    if (metrics->tensorboard() && record.kind() == pb::TaskMetrics::EPOCH) {
      log_kernel_pictures(*metrics->tensorboard(), start.config, *model, record.step());
    }
  };

  TranslationLearner learner(options, start, data, model, device, communicator, warmup);
  if (resuming) learner.carry_epoch_checkpoints(static_cast<int>(position.epoch()));
  StepSettings step_settings;
  step_settings.job = "translation";
  step_settings.unit = "update";
  step_settings.clip_norm = options.clip_norm;
  step_settings.max_skipped_updates = options.max_skipped_updates;
  const int64_t period =
      options.lr_period_updates > 0 ? options.lr_period_updates : std::max<int64_t>(total_steps - warmup, 1);
  step_settings.learning_rate = [&, period](int64_t update) {
    if (options.schedule == "linear") return linear_warmup_decay(options.lr, update, warmup, total_steps);
    if (options.schedule == "cosine") return cosine(options.lr, update, warmup, period, options.min_lr);
    return inverse_sqrt(options.lr, update, warmup);
  };
  step_settings.non_finite_loss = [](double loss, int64_t update, int) {
    return str("translation: the loss became ", loss, " at update ", update, "; lower --lr");
  };
  UpdateStep step(*model, optimizer, device, step_settings, communicator, static_cast<int64_t>(position.update()));
  EpochSettings epoch_settings;
  epoch_settings.job = "translation";
  epoch_settings.epochs = options.epochs;
  epoch_settings.seed = options.seed;
  epoch_settings.order = EpochOrder::kFresh;
  epoch_settings.log_every = options.log_every;
  epoch_settings.patience = options.patience;
  epoch_settings.progress_title = "translation";
  epoch_settings.last_path = last_path;
  epoch_settings.after_step = options.after_step;
  epoch_settings.append_metrics = append_metrics;
  epoch_settings.seconds = [&] { return clock.seconds(); };
  EpochLoop loop(learner, step, *model, optimizer, epoch_settings, communicator);
  if (resuming) loop.resume(position, carried);
  EpochRunResult result = loop.run();
  summary.epochs = result.epochs;

  if (!result.best.empty()) {
    summary.best = result.best.front();
    pb::TaskMetrics best = summary.best;
    best.set_kind(pb::TaskMetrics::BEST_OF_RUN);
    append_metrics(best);
  }
  // The last whole epoch: --epochs, or the last one before the stop when a resume with --epochs lowered past it
  // trained none (the average then takes the epochs before the stop, and the resumed metrics get its record again).
  if (learner.epoch_checkpoints().size() >= 2 && main_rank) {
    summary.averaged = write_average(options, learner, data, start, result.last_epoch, step.updates(), device,
                                     &summary.averaged_checkpoint);
    append_metrics(summary.averaged);
  }
  if (metrics) metrics->close();
  return summary;
}

}  // namespace cabert::train
