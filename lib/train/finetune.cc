#include "lib/train/finetune.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "lib/config/model_config_text.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/core/random.h"
#include "lib/dist/communicator.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/control_score.h"
#include "lib/eval/predict_split.h"
#include "lib/eval/task_score.h"
#include "lib/eval/text_to_text.h"
#include "lib/io/record_file.h"
#include "lib/io/tensorboard_metrics.h"
#include "lib/ops/device.h"
#include "lib/train/adafactor.h"
#include "lib/train/checkpoint.h"
#include "lib/train/encoder_learner.h"
#include "lib/train/finetune_learner.h"
#include "lib/train/metrics_log.h"
#include "lib/train/model_directory.h"
#include "lib/train/optimizer.h"
#include "lib/train/resume_options.h"
#include "lib/train/schedule.h"
#include "lib/train/tensorboard_pictures.h"
#include "lib/train/text_to_text_learner.h"
#include "lib/train/training_loop.h"
#include "lib/train/update_guard.h"

namespace fs = std::filesystem;

namespace cabert::train {

using tasks::TaskKind;

TaskDefaults task_defaults(const std::string& task, int hidden_size) {
  TaskDefaults defaults;
  if (task == "MNLI" || task == "QQP") {
    defaults.batch_size = 128;
    defaults.epochs = 4;
  } else if (task == "RTE" || task == "STS-B") {
    defaults.epochs = 10;
  } else if (task.rfind("SQuAD", 0) == 0) {
    defaults.epochs = 2;
  }
  if (task == "QNLI" || hidden_size >= 768) defaults.lr = 1e-4;
  return defaults;
}

namespace {

int resolve_max_length(int requested, const tasks::TaskDefinition& definition, const pb::ModelConfig& config) {
  int fallback = definition.kind == TaskKind::kSpan ? 384 : 128;
  // An encoder's embeddings take at most max_length positions (the table of absolute position embeddings, and
  // the length every encoder family was pre-trained up to); the encoder-decoders' sinusoidal positions any length.
  const bool bounded = !config.has_seq2seq();
  if (requested > 0) {
    if (bounded && requested > config.max_length()) {
      throw UsageError(str("--max-length ", requested, ": the model takes at most ", config.max_length(),
                           " positions (its max_length)"));
    }
    return requested;
  }
  if (bounded && fallback > config.max_length()) {
    log_info("finetune: max length ", config.max_length(), " (the model's position table) instead of ", fallback);
    return config.max_length();
  }
  return fallback;
}

std::string model_name(const FinetuneOptions& options) {
  if (!options.name.empty()) return options.name;
  std::string name = fs::path(options.model_dir).lexically_normal().filename().string();
  if (name.empty() || name == ".") name = fs::absolute(options.model_dir).lexically_normal().parent_path().filename();
  return name;
}

std::map<std::string, std::string> task_metadata(const tasks::TaskDefinition& definition,
                                                 const tasks::TaskSource& source, int max_length,
                                                 const tasks::SquadOptions& squad) {
  return {{"task", tasks::definition_to_json(definition, source)},
          {"max_length", std::to_string(max_length)},
          {"doc_stride", std::to_string(squad.doc_stride)},
          {"max_query_length", std::to_string(squad.max_query_length)},
          {"max_answer_length", std::to_string(squad.max_answer_length)},
          {"n_best", std::to_string(squad.n_best)},
          {"null_threshold", std::to_string(squad.null_threshold)}};
}

std::string describe_metrics(const eval::MetricMap& metrics) {
  std::string text;
  for (const auto& [name, value] : metrics) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%s %.4f", name.c_str(), value);
    text += (text.empty() ? "" : ", ") + std::string(buffer);
  }
  return text;
}

// What every run of a fine-tuning shares: the model's start, the task, the learner and the settings.
struct FinetuneSetup {
  io::Checkpoint init;  // empty path: a preset's random initialisation
  pb::ModelConfig config;
  std::unique_ptr<text::Tokenizer> tokenizer;
  tasks::LoadedTask task;
  double lr = 0;
  int epochs = 0, batch_size = 0, max_length = 0;
  tasks::SquadOptions squad;
  std::unique_ptr<FinetuneLearner> learner;
  std::vector<eval::ControlScore> controls;  // one per dev file
  int64_t steps_per_epoch = 0, total_steps = 0, warmup = 0;
};

void check_options(const FinetuneOptions& options) {
  int sources = !options.init.empty() + !options.preset.empty() + !options.init_from_task.empty();
  if (sources != 1) {
    throw UsageError("give exactly one of --init CKPT (pre-trained), --preset NAME (random initialisation) or "
                     "--init-from-task CKPT (a fine-tuned encoder, e.g. MNLI)");
  }
  if (options.model_dir.empty()) throw UsageError("--model-dir is required");
  if (options.runs < 1) throw UsageError(str("--runs: expected at least 1, got ", options.runs));
  if (options.lr_schedule != "linear" && options.lr_schedule != "constant") {
    throw UsageError(str("--lr-schedule: expected linear or constant, got '", options.lr_schedule, "'"));
  }
  if (options.optimizer != "adamw" && options.optimizer != "adafactor") {
    throw UsageError(str("--optimizer: expected adamw or adafactor, got '", options.optimizer, "'"));
  }
}

// The model config and the checkpoint whose encoder the runs start from, and the tokenizer.
void resolve_start(const FinetuneOptions& options, FinetuneSetup& setup) {
  if (!options.preset.empty()) {
    if (options.tokenizer.empty()) throw UsageError("--preset needs --tokenizer MODEL (the SentencePiece model)");
    setup.config = config::load_model_config(options.preset, options.set_overrides);
  } else {
    const std::string& path = options.init.empty() ? options.init_from_task : options.init;
    setup.init = io::load_checkpoint(path);
    if (!options.init_from_task.empty() && setup.init.info.kind() != "finetune") {
      throw DataError(str("--init-from-task ", path, ": expected a fine-tuned checkpoint, got a '",
                          setup.init.info.kind(), "' checkpoint (use --init for pre-trained ones)"));
    }
    setup.config = setup.init.info.model();
    if (!options.set_overrides.empty()) {
      for (const auto& assignment : options.set_overrides) config::apply_override(&setup.config, assignment);
      config::validate_model_config(setup.config);
    }
  }
  setup.tokenizer = std::make_unique<text::Tokenizer>(
      options.preset.empty() ? eval::open_checkpoint_tokenizer(setup.init.info, setup.init.path, options.tokenizer)
                             : text::Tokenizer(options.tokenizer));
  if (!options.preset.empty() && setup.config.vocab_size() != setup.tokenizer->vocab_size()) {
    log_info("finetune: vocabulary size ", setup.tokenizer->vocab_size(), " from ", setup.tokenizer->path(),
             " (preset has ", setup.config.vocab_size(), ")");
    setup.config.set_vocab_size(setup.tokenizer->vocab_size());
  }
}

// The pre-training run the encoder comes from (the summary's mean over pre-training seeds): a pre-trained
// checkpoint's path and --seed; a fine-tuned one (--init-from-task) passes on the run it started from.
std::pair<std::string, std::string> pretrain_run(const io::Checkpoint& init) {
  const auto& metadata = init.info.metadata();
  auto get = [&](const char* key) { return metadata.count(key) ? metadata.at(key) : std::string(); };
  if (init.info.kind() == "finetune") return {get("pretrain_run"), get("pretrain_seed")};
  if (init.path.empty()) return {};
  return {fs::absolute(init.path).lexically_normal().string(), get("seed")};
}

// An encoder gets a task head; an encoder-decoder learns every classification task as text-to-text (Tay et al.).
std::unique_ptr<FinetuneLearner> make_learner(const FinetuneOptions& options, const FinetuneSetup& setup,
                                              torch::Device device) {
  const tasks::TaskDefinition& definition = setup.task.definition;
  eval::PredictOptions predict;
  predict.max_length = setup.max_length;
  predict.batch_size = options.eval_batch_size;
  predict.squad = setup.squad;
  predict.device = device;
  const io::Checkpoint* start = options.preset.empty() ? &setup.init : nullptr;
  if (setup.config.has_seq2seq()) {
    if (models::parse_pooling(options.pooling) != models::Pooling::kCls) {
      throw UsageError(str("--pooling ", options.pooling, ": an encoder-decoder learns ", definition.name,
                           " as text-to-text and has no pooled head"));
    }
    if (setup.init.info.kind() == "finetune" && !eval::is_text_to_text(setup.init.info)) {
      throw UsageError(str(setup.init.path, " is an encoder-decoder fine-tuned on translation; start text-to-text "
                                            "fine-tuning from a pre-trained (span-corruption) checkpoint or a preset"));
    }
    TextToTextSetup text_to_text;
    text_to_text.config = setup.config;
    text_to_text.init = start;
    text_to_text.definition = definition;
    text_to_text.verbalizer = tasks::make_verbalizer(definition, options.label_texts);
    text_to_text.train = &setup.task.train.data;
    text_to_text.tokenizer = setup.tokenizer.get();
    text_to_text.predict = predict;
    text_to_text.label_smoothing = options.label_smoothing;
    text_to_text.max_train_examples = options.max_train_examples;
    text_to_text.reinit_decoder = options.reinit_decoder;
    text_to_text.target_sentinel_prefix = options.target_sentinel_prefix;
    if (options.reinit_decoder && start == nullptr) {
      throw UsageError("--reinit-decoder: expected --init CKPT (a pre-trained encoder-decoder); a --preset's decoder "
                       "is drawn afresh already");
    }
    return make_text_to_text_learner(text_to_text);
  }
  if (options.reinit_decoder || options.target_sentinel_prefix) {
    throw UsageError(str(options.reinit_decoder ? "--reinit-decoder" : "--target-sentinel-prefix",
                         ": for text-to-text fine-tuning of an encoder-decoder; '", setup.config.name(),
                         "' is an encoder"));
  }
  if (definition.name == "text-to-text") {
    throw UsageError(str("--task text-to-text needs an encoder-decoder (a tay-*, wu-* or transformer-* preset, or a "
                         "span-corruption checkpoint); '",
                         setup.config.name(), "' is an encoder"));
  }
  const models::Pooling pooling = models::parse_pooling(options.pooling);
  if (pooling != models::Pooling::kCls && definition.kind == TaskKind::kSpan) {
    throw UsageError(str("--pooling ", options.pooling,
                         ": SQuAD's span head scores every position; pooling "
                         "applies to classification and regression"));
  }
  return make_encoder_learner(setup.config, start, setup.task, *setup.tokenizer, predict, options.max_train_examples,
                              pooling);
}

// The task's data and settings, its learner and the schedule's length.
void prepare_task(const FinetuneOptions& options, const tasks::TaskSource& source, int world, torch::Device device,
                  FinetuneSetup& setup) {
  setup.task = tasks::load_training_task(source);
  const tasks::TaskDefinition& definition = setup.task.definition;
  const TaskDefaults defaults = task_defaults(definition.name, setup.config.hidden_size());
  // Adafactor's lr is a step relative to each parameter's RMS: T5's fine-tuning rate unless given.
  const double default_lr = options.optimizer == "adafactor" ? kAdafactorFinetuneLr : defaults.lr;
  setup.lr = options.lr > 0 ? options.lr : default_lr;
  setup.epochs = options.epochs > 0 ? options.epochs : defaults.epochs;
  setup.batch_size = options.batch_size > 0 ? options.batch_size : defaults.batch_size;
  setup.max_length = resolve_max_length(options.max_length, definition, setup.config);
  setup.squad = options.squad;
  setup.squad.max_length = setup.max_length;
  setup.learner = make_learner(options, setup, device);
  for (const auto& dev : setup.task.dev) {
    setup.controls.push_back(eval::control_score(definition, setup.task.train, options.max_train_examples, dev));
    const eval::ControlScore& control = setup.controls.back();
    if (control.defined) {
      log_info("finetune: ", dev.metrics_task, " dev control: score ", control.score, " (", control.rule, ")");
    }
  }
  const size_t examples = setup.learner->examples();
  const size_t joint_batch = static_cast<size_t>(setup.batch_size) * world;
  setup.steps_per_epoch = static_cast<int64_t>((examples + joint_batch - 1) / joint_batch);
  setup.total_steps = setup.steps_per_epoch * setup.epochs;
  setup.warmup = static_cast<int64_t>(std::llround(options.warmup_ratio * setup.total_steps));
  log_info("finetune: ", definition.name, " (", tasks::task_kind_name(definition.kind),
           setup.config.has_seq2seq() ? ", text-to-text" : "", "), ", examples,
           definition.kind == TaskKind::kSpan ? " training windows" : " training examples", ", dev ",
           setup.task.dev.front().size(), "; lr ", setup.lr, ", batch ", setup.batch_size,
           world > 1 ? str(" x ", world, " processes") : "", ", epochs ", setup.epochs, ", warm-up ", setup.warmup,
           " of ", setup.total_steps, " steps then ", options.lr_schedule, ", ", options.optimizer, ", max length ",
           setup.max_length, ", ", options.runs, " run(s)");
}

// One run of a fine-tuning in the EpochLoop: the family's learner (encoder head or text-to-text) computes the
// loss of each rank's share of a joint batch; the dev files score each epoch, the first ranks them.
class FinetuneEpochs : public EpochLearner {
 public:
  FinetuneEpochs(const FinetuneOptions& options, const tasks::TaskSource& source, FinetuneSetup& setup,
                 torch::nn::Module& model, dist::Communicator& communicator, int run, std::string run_checkpoint)
      : options_(options),
        source_(source),
        setup_(setup),
        model_(model),
        communicator_(communicator),
        run_(run),
        run_checkpoint_(std::move(run_checkpoint)),
        name_(model_name(options)) {}

  size_t order_size() const override { return setup_.learner->examples(); }
  int64_t batches_per_epoch() const override { return setup_.steps_per_epoch; }
  void select_batch(const std::vector<size_t>& order, int64_t index) override {
    order_ = &order;
    index_ = index;
  }

  MicroBatch micro_batch(int /*micro*/, int /*accumulate*/) override {
    // This rank's part of the joint batch order[joint_begin, joint_end).
    const size_t examples = setup_.learner->examples(), batch = static_cast<size_t>(setup_.batch_size);
    const size_t world = static_cast<size_t>(communicator_.world_size());
    const size_t joint_begin = static_cast<size_t>(index_) * batch * world;
    const size_t joint_end = std::min(examples, joint_begin + batch * world);
    const size_t begin = std::min(joint_end, joint_begin + communicator_.rank() * batch);
    const size_t end = std::min(joint_end, begin + batch);
    MicroBatch out;
    if (end > begin) {
      // The mean over this rank's examples, weighted by its share of the joint batch (the gradient all-reduce
      // averages over the ranks).
      out.loss = setup_.learner->loss(*order_, begin, end) *
                 (static_cast<double>((end - begin) * world) / static_cast<double>(joint_end - joint_begin));
      out.tokens = setup_.learner->tokens(*order_, begin, end);
    } else {
      out.loss = setup_.learner->loss(*order_, joint_begin, joint_begin + 1) * 0.0;  // the last joint batch ran short
    }
    return out;
  }

  std::vector<pb::TaskMetrics> evaluate_epoch(int epoch, int64_t /*update*/, double /*train_loss*/) override {
    std::vector<pb::TaskMetrics> records;
    const eval::MetricMap diagnostics = setup_.learner->training_diagnostics();
    if (!diagnostics.empty()) {
      log_info("finetune: epoch ", epoch, " on training examples: ", describe_metrics(diagnostics));
    }
    for (size_t d = 0; d < setup_.task.dev.size(); ++d) {
      const tasks::TaskSplit& dev = setup_.task.dev[d];
      eval::SplitPredictions predictions = setup_.learner->evaluate(dev);
      pb::TaskMetrics record;
      record.set_model(name_);
      record.set_task(dev.metrics_task);
      record.set_split("dev");
      record.set_data(dev.path);
      record.set_examples(dev.size());
      for (const auto& [metric, value] : predictions.metrics) (*record.mutable_metrics())[metric] = value;
      for (const auto& [metric, value] : diagnostics) (*record.mutable_metrics())[metric] = value;
      record.set_score(predictions.score);
      add_controls(setup_.controls[d], predictions, &record);
      record.set_checkpoint(fs::absolute(run_checkpoint_).lexically_normal().string());
      const auto [pretrain_path, pretrain_seed] = pretrain_run(setup_.init);
      record.set_pretrain_run(pretrain_path);
      if (!pretrain_seed.empty()) record.set_pretrain_seed(std::stoull(pretrain_seed));
      log_info("finetune: epoch ", epoch, " ", dev.metrics_task, " dev: score ", predictions.score, " (",
               describe_metrics(predictions.metrics), ")");
      records.push_back(record);
    }
    return records;
  }

  // The dev split's control and the truncated training and dev examples, beside the score they qualify.
  void add_controls(const eval::ControlScore& control, const eval::SplitPredictions& predictions,
                    pb::TaskMetrics* record) const {
    if (control.defined) {
      record->set_control_score(control.score);
      record->set_control(control.rule);
    }
    if (const auto truncated = setup_.learner->truncated_examples()) {
      record->set_train_truncated(*truncated);
      record->set_train_examples(setup_.learner->examples());
    }
    if (setup_.task.definition.kind != TaskKind::kSpan) record->set_dev_truncated(predictions.truncated_examples);
  }

  pb::CheckpointInfo checkpoint_info(int epoch, int64_t update) const override {
    pb::CheckpointInfo info = fine_tuned_info(setup_.config, *setup_.tokenizer, update);
    auto& metadata = *info.mutable_metadata();
    for (const auto& [key, value] : task_metadata(setup_.task.definition, source_, setup_.max_length, setup_.squad)) {
      metadata[key] = value;
    }
    metadata["epoch"] = std::to_string(epoch);
    metadata["run"] = std::to_string(run_);
    metadata["seed"] = std::to_string(options_.seed + run_);
    metadata["initialised_from"] = options_.preset.empty() ? setup_.init.path : "random (" + options_.preset + ")";
    const auto [pretrain_path, pretrain_seed] = pretrain_run(setup_.init);
    if (!pretrain_path.empty()) metadata["pretrain_run"] = pretrain_path;
    if (!pretrain_seed.empty()) metadata["pretrain_seed"] = pretrain_seed;
    setup_.learner->describe(&info);
    return info;
  }

  void save_best(int epoch, int64_t update, const std::vector<pb::TaskMetrics>& records) override {
    pb::CheckpointInfo info = checkpoint_info(epoch, update);
    (*info.mutable_metadata())["dev_score"] = std::to_string(records.front().score());
    check_finite_weights(io::module_tensors(model_, "model/"), "finetune", str("after epoch ", epoch));
    if (communicator_.is_main()) {
      io::save_checkpoint(run_checkpoint_, info, io::module_tensors(model_, "model/"));
      log_info("finetune: best so far, saved ", run_checkpoint_);
    }
  }

  pb::TaskMetrics train_record() const override {
    pb::TaskMetrics record;
    record.set_model(name_);
    record.set_task(setup_.task.definition.name);
    return record;
  }

 private:
  const FinetuneOptions& options_;
  const tasks::TaskSource& source_;
  FinetuneSetup& setup_;
  torch::nn::Module& model_;
  dist::Communicator& communicator_;
  int run_;
  std::string run_checkpoint_, name_;
  const std::vector<size_t>* order_ = nullptr;
  int64_t index_ = 0;
};

// Where a resumed fine-tuning continues: last.cabert and the records before its position.
struct Resume {
  bool active = false;
  io::Checkpoint last;  // its header and path; the tensors are read when its run starts
  pb::TrainingPosition position;
  std::vector<pb::TaskMetrics> carried;
};

Resume find_resume(const FinetuneOptions& options, const FinetuneSetup& setup, const std::string& last_path,
                   const std::string& metrics_path) {
  Resume resume;
  if (!options.resume) return resume;
  if (!fs::exists(last_path)) {
    log_info("finetune: --resume: no ", last_path, ", starting from scratch");
    return resume;
  }
  resume.active = true;
  // The header only: the run it continues reads the tensors when it starts (held for the whole fine-tuning, the
  // model's and the optimizer's tensors would double its memory).
  resume.last.info = io::read_checkpoint_info(last_path);
  resume.last.path = last_path;
  eval::check_tokenizer_matches(*setup.tokenizer, resume.last.info, last_path);
  if (resume.last.info.model().SerializeAsString() != setup.config.SerializeAsString()) {
    throw UsageError(str("--resume: ", last_path,
                         " holds another model config; resume with the same --init/--preset/"
                         "--set"));
  }
  resume.position = resume_position(resume.last);
  const bool finished = static_cast<int>(resume.position.run()) >= options.runs ||
                        (static_cast<int>(resume.position.run()) == options.runs - 1 &&
                         static_cast<int>(resume.position.epoch()) > setup.epochs);
  check_resume_options(last_path, options.allow_changed_options, finished);
  resume.carried = records_before(metrics_path, resume.position);
  log_info("finetune: resuming from ", last_path, " at run ", resume.position.run() + 1, ", epoch ",
           resume.position.epoch(), ", batch ", resume.position.batch(), " (update ", resume.position.update(), ")");
  return resume;
}

// What the runs leave for the summary.
struct RunOutcome {
  std::vector<pb::TaskMetrics> best;  // the best epoch's records, one per dev file
  double score = 0;
  std::string checkpoint;
};

// A run that finished before the resume: its BEST_OF_RUN records are among the carried ones.
RunOutcome carried_run(const Resume& resume, int run, const std::string& checkpoint) {
  RunOutcome outcome;
  outcome.checkpoint = checkpoint;
  for (const auto& record : resume.carried) {
    if (record.kind() == pb::TaskMetrics::BEST_OF_RUN && static_cast<int>(record.run()) == run) {
      outcome.best.push_back(record);
    }
  }
  if (outcome.best.empty()) {
    throw DataError(str("--resume: the metrics of run ", run + 1, " (before the checkpoint's run ",
                        resume.position.run() + 1, ") are missing from metrics.cabert; start afresh"));
  }
  outcome.score = outcome.best.front().score();
  return outcome;
}

struct RunContext {
  const FinetuneOptions& options;
  const tasks::TaskSource& source;
  FinetuneSetup& setup;
  dist::Communicator& communicator;
  torch::Device device;
  const Resume& resume;
  std::string last_path;
  std::function<void(const pb::TaskMetrics&)> append_metrics;
  const RunClock& clock;
  io::TensorboardLog* tensorboard = nullptr;  // rank 0's --tensorboard, for the pictures
};

// --optimizer's, at the peak learning rate `lr`, with --weight-decay (neither on biases nor LayerNorm weights).
std::unique_ptr<Optimizer> make_optimizer(const FinetuneOptions& options, const torch::nn::Module& model, double lr) {
  if (options.optimizer == "adafactor") {
    AdafactorOptions adafactor;
    adafactor.lr = lr;
    adafactor.weight_decay = options.weight_decay;
    return std::make_unique<Adafactor>(model, adafactor);
  }
  AdamWOptions adam;
  adam.lr = lr;
  adam.weight_decay = options.weight_decay;
  return std::make_unique<AdamW>(model, adam);
}

RunOutcome train_run(RunContext& context, int run) {
  const FinetuneOptions& options = context.options;
  FinetuneSetup& setup = context.setup;
  dist::Communicator& communicator = context.communicator;
  const uint64_t seed = options.seed + run;
  torch::manual_seed(seed);
  torch::nn::Module& model = setup.learner->start_run();
  if (communicator.distributed()) {
    // Rank 0's initial weights everywhere; dropout then draws differently on each rank.
    std::vector<torch::Tensor> state = model.parameters(true);
    for (auto& buffer : model.buffers(true)) state.push_back(buffer);
    communicator.broadcast(state, "the initial parameters");
    if (!communicator.is_main()) torch::manual_seed(mix_seed(seed, static_cast<uint64_t>(communicator.rank())));
  }
  std::unique_ptr<Optimizer> optimizer_owner = make_optimizer(options, model, setup.lr);
  Optimizer& optimizer = *optimizer_owner;
  const bool continuing = context.resume.active && static_cast<int>(context.resume.position.run()) == run;
  pb::TrainingPosition position;
  if (continuing) {
    position = restore_resume_checkpoint(io::load_checkpoint(context.resume.last.path), model, optimizer, communicator);
  }

  RunOutcome outcome;
  const std::string run_dir = options.runs > 1 ? (fs::path(options.model_dir) / str("run-", run)).string() : "";
  if (!run_dir.empty()) create_output_directory(run_dir, "--model-dir");
  outcome.checkpoint = run_dir.empty() ? (fs::path(options.model_dir) / "best.cabert").string()
                                       : (fs::path(run_dir) / "best.cabert").string();
  StepSettings step_settings;
  step_settings.job = "finetune";
  step_settings.clip_norm = options.clip_norm;
  step_settings.max_skipped_updates = options.max_skipped_updates;
  step_settings.learning_rate = [&setup, constant = options.lr_schedule == "constant"](int64_t update) {
    return constant ? warmup_then_constant(setup.lr, update, setup.warmup)
                    : linear_warmup_decay(setup.lr, update, setup.warmup, setup.total_steps);
  };
  step_settings.non_finite_loss = [](double loss, int64_t update, int) {
    return str("finetune: the loss became ", loss, " at step ", update, "; lower --lr");
  };
  UpdateStep step(model, optimizer, context.device, step_settings, communicator,
                  static_cast<int64_t>(position.update()));
  FinetuneEpochs learner(options, context.source, setup, model, communicator, run, outcome.checkpoint);
  EpochSettings epoch_settings;
  epoch_settings.epochs = setup.epochs;
  epoch_settings.run = run;
  epoch_settings.seed = seed;
  epoch_settings.order = EpochOrder::kCarried;
  epoch_settings.log_every = options.log_every;
  epoch_settings.patience = options.patience;
  epoch_settings.progress_title =
      str("finetune ", setup.task.definition.name, options.runs > 1 ? str(" run ", run + 1, "/", options.runs) : "");
  epoch_settings.last_path = context.last_path;
  epoch_settings.after_step = options.after_step;
  // With --tensorboard, the learned kernels after each epoch (once per step: MNLI's two dev sets share it).
  int64_t pictured_step = -1;
  epoch_settings.append_metrics = [&](const pb::TaskMetrics& record) {
    context.append_metrics(record);
    if (!context.tensorboard || record.kind() != pb::TaskMetrics::EPOCH) return;
    if (static_cast<int64_t>(record.step()) == pictured_step) return;
    pictured_step = static_cast<int64_t>(record.step());
    log_kernel_pictures(*context.tensorboard, setup.config, model, pictured_step, static_cast<uint32_t>(run));
  };
  epoch_settings.seconds = [&context] { return context.clock.seconds(); };
  EpochLoop loop(learner, step, model, optimizer, epoch_settings, communicator);
  if (continuing) loop.resume(position, context.resume.carried);
  EpochRunResult result = loop.run();
  outcome.best = result.best;
  outcome.score = loop.position().best_score();
  for (auto record : outcome.best) {
    record.set_kind(pb::TaskMetrics::BEST_OF_RUN);
    context.append_metrics(record);
  }
  return outcome;
}

// The runs' best and mean +- SEM, and with --runs N > 1 the best run's checkpoint at the top level.
void summarise_runs(const std::vector<RunOutcome>& runs, bool main_rank, FinetuneSummary& summary) {
  std::vector<double> scores;
  for (const auto& run : runs) {
    scores.push_back(run.score);
    for (const auto& record : run.best) {
      pb::TaskMetrics best = record;
      best.set_kind(pb::TaskMetrics::BEST_OF_RUN);
      summary.best_of_runs.push_back(best);
    }
  }
  summary.best_run =
      std::max_element(scores.begin(), scores.end(), [](double a, double b) { return eval::better_score(b, a); }) -
      scores.begin();
  summary.best_score = scores[summary.best_run];
  // A run whose every dev score was NaN failed: the mean and SEM are over the others, and the log says so.
  std::vector<double> numbers;
  for (double score : scores) {
    if (!std::isnan(score)) numbers.push_back(score);
  }
  if (numbers.size() < scores.size()) {
    log_warning("finetune: ", scores.size() - numbers.size(), " of ", scores.size(),
                " runs ended with a NaN dev score; the mean is over the other ", numbers.size());
  }
  summary.primary = numbers.empty() ? eval::mean_and_sem(scores) : eval::mean_and_sem(numbers);
  if (runs.size() > 1 && main_rank) {
    // The best run's checkpoint also goes to the model directory's top level (copied atomically).
    std::string temp = summary.checkpoint + ".tmp";
    fs::copy_file(runs[summary.best_run].checkpoint, temp, fs::copy_options::overwrite_existing);
    fs::rename(temp, summary.checkpoint);
  }
}

}  // namespace

FinetuneSummary run_finetune(const FinetuneOptions& options, const tasks::TaskSource& source) {
  check_options(options);
  dist::Communicator single;
  dist::Communicator& communicator = options.communicator != nullptr ? *options.communicator : single;
  const bool main_rank = communicator.is_main();
  torch::Device device = ops::select_device(options.device);
  FinetuneSetup setup;
  resolve_start(options, setup);
  if (main_rank) {
    refuse_other_run(options.model_dir, DirectoryRun::kFinetuning);
    refuse_start_among_outputs(options.model_dir, DirectoryRun::kFinetuning, setup.init.path,
                               finetuning_checkpoints(options.model_dir));
  }
  prepare_task(options, source, communicator.world_size(), device, setup);

  FinetuneSummary summary;
  summary.metrics_path = (fs::path(options.model_dir) / "metrics.cabert").string();
  summary.checkpoint = (fs::path(options.model_dir) / "best.cabert").string();
  summary.primary_task = setup.task.dev.front().metrics_task;
  const std::string last_path = (fs::path(options.model_dir) / "last.cabert").string();
  const Resume resume = find_resume(options, setup, last_path, summary.metrics_path);
  create_output_directory(options.model_dir, "--model-dir");
  if (main_rank && !resume.active) {
    remove_earlier_outputs(options.model_dir, DirectoryRun::kFinetuning, finetuning_checkpoints(options.model_dir));
  }
  std::unique_ptr<TaskMetricsLog> metrics;  // rank 0's, with the --tensorboard events
  if (main_rank) {
    TaskMetricsLogOptions log_options;
    log_options.metadata = {{"task", setup.task.definition.name}, {"model", model_name(options)}};
    log_options.carried = resume.carried;
    log_options.tensorboard_dir = options.tensorboard;
    log_options.resume_step = resume.active ? static_cast<int64_t>(resume.position.update()) : -1;
    log_options.resume_run = resume.position.run();
    log_options.runs = static_cast<uint32_t>(options.runs);
    metrics = std::make_unique<TaskMetricsLog>(summary.metrics_path, setup.config, log_options);
  }
  const RunClock clock(metrics ? metrics->seconds_before() : 0);
  RunContext context{options,
                     source,
                     setup,
                     communicator,
                     device,
                     resume,
                     last_path,
                     [&](const pb::TaskMetrics& record) {
                       if (metrics) metrics->add(record);
                     },
                     clock,
                     metrics ? metrics->tensorboard() : nullptr};
  std::vector<RunOutcome> runs;
  try {
    for (int run = 0; run < options.runs; ++run) {
      const std::string run_checkpoint = options.runs > 1
                                             ? (fs::path(options.model_dir) / str("run-", run) / "best.cabert").string()
                                             : summary.checkpoint;
      if (resume.active && run < static_cast<int>(resume.position.run())) {
        runs.push_back(carried_run(resume, run, run_checkpoint));
      } else {
        runs.push_back(train_run(context, run));
      }
    }
  } catch (const Interrupted&) {
    if (metrics) metrics->close();
    throw;
  }
  if (metrics) metrics->close();
  summarise_runs(runs, main_rank, summary);
  return summary;
}

}  // namespace cabert::train
