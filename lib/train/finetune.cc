#include "lib/train/finetune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>

#include "lib/config/model_config_text.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/progress.h"
#include "lib/core/random.h"
#include "lib/dist/communicator.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/predict_split.h"
#include "lib/eval/task_score.h"
#include "lib/eval/text_to_text.h"
#include "lib/io/record_file.h"
#include "lib/ops/device.h"
#include "lib/train/checkpoint.h"
#include "lib/train/encoder_learner.h"
#include "lib/train/finetune_learner.h"
#include "lib/train/model_directory.h"
#include "lib/train/optimizer.h"
#include "lib/train/schedule.h"
#include "lib/train/text_to_text_learner.h"
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

}  // namespace

FinetuneSummary run_finetune(const FinetuneOptions& options, const tasks::TaskSource& source) {
  int sources = !options.init.empty() + !options.preset.empty() + !options.init_from_task.empty();
  if (sources != 1) {
    throw UsageError("give exactly one of --init CKPT (pre-trained), --preset NAME (random initialisation) or "
                     "--init-from-task CKPT (a fine-tuned encoder, e.g. MNLI)");
  }
  if (options.model_dir.empty()) throw UsageError("--model-dir is required");
  if (options.runs < 1) throw UsageError(str("--runs: expected at least 1, got ", options.runs));
  dist::Communicator single;
  dist::Communicator& communicator = options.communicator != nullptr ? *options.communicator : single;
  const int world = communicator.world_size();
  const bool main_rank = communicator.is_main();
  torch::Device device = ops::select_device(options.device);

  // Model config and the checkpoint whose encoder we start from.
  io::Checkpoint init;
  pb::ModelConfig config;
  if (!options.preset.empty()) {
    if (options.tokenizer.empty()) throw UsageError("--preset needs --tokenizer MODEL (the SentencePiece model)");
    config = config::load_model_config(options.preset, options.set_overrides);
  } else {
    const std::string& path = options.init.empty() ? options.init_from_task : options.init;
    init = io::load_checkpoint(path);
    if (!options.init_from_task.empty() && init.info.kind() != "finetune") {
      throw DataError(str("--init-from-task ", path, ": expected a fine-tuned checkpoint, got a '", init.info.kind(),
                           "' checkpoint (use --init for pre-trained ones)"));
    }
    config = init.info.model();
    if (!options.set_overrides.empty()) {
      for (const auto& assignment : options.set_overrides) config::apply_override(&config, assignment);
      config::validate_model_config(config);
    }
  }
  const text::Tokenizer tokenizer = options.preset.empty()
                                        ? eval::open_checkpoint_tokenizer(init.info, init.path, options.tokenizer)
                                        : text::Tokenizer(options.tokenizer);
  if (!options.preset.empty() && config.vocab_size() != tokenizer.vocab_size()) {
    log_info("finetune: vocabulary size ", tokenizer.vocab_size(), " from ", tokenizer.path(), " (preset has ",
             config.vocab_size(), ")");
    config.set_vocab_size(tokenizer.vocab_size());
  }

  if (main_rank) {
    refuse_other_run(options.model_dir, DirectoryRun::kFinetuning);
    refuse_start_among_outputs(options.model_dir, DirectoryRun::kFinetuning, init.path,
                               finetuning_checkpoints(options.model_dir));
  }

  tasks::LoadedTask task = tasks::load_training_task(source);
  const tasks::TaskDefinition& definition = task.definition;
  TaskDefaults defaults = task_defaults(definition.name, config.hidden_size());
  double lr = options.lr > 0 ? options.lr : defaults.lr;
  int epochs = options.epochs > 0 ? options.epochs : defaults.epochs;
  int batch_size = options.batch_size > 0 ? options.batch_size : defaults.batch_size;
  int max_length = resolve_max_length(options.max_length, definition, config);
  tasks::SquadOptions squad = options.squad;
  squad.max_length = max_length;

  eval::PredictOptions predict;
  predict.max_length = max_length;
  predict.batch_size = options.eval_batch_size;
  predict.squad = squad;
  predict.device = device;
  // An encoder-decoder learns every classification task as text-to-text (Tay et al.).
  std::unique_ptr<FinetuneLearner> learner;
  tasks::Verbalizer verbalizer;
  const io::Checkpoint* start = options.preset.empty() ? &init : nullptr;
  if (config.has_seq2seq()) {
    if (models::parse_pooling(options.pooling) != models::Pooling::kCls) {
      throw UsageError(str("--pooling ", options.pooling, ": an encoder-decoder learns ", definition.name,
                           " as text-to-text and has no pooled head"));
    }
    if (init.info.kind() == "finetune" && !eval::is_text_to_text(init.info)) {
      throw UsageError(str(init.path, " is an encoder-decoder fine-tuned on translation; start text-to-text "
                           "fine-tuning from a pre-trained (span-corruption) checkpoint or a preset"));
    }
    verbalizer = tasks::make_verbalizer(definition, options.label_texts);
    TextToTextSetup setup;
    setup.config = config;
    setup.init = start;
    setup.definition = definition;
    setup.verbalizer = verbalizer;
    setup.train = &task.train.data;
    setup.tokenizer = &tokenizer;
    setup.predict = predict;
    setup.label_smoothing = options.label_smoothing;
    setup.max_train_examples = options.max_train_examples;
    learner = make_text_to_text_learner(setup);
  } else {
    if (definition.name == "text-to-text") {
      throw UsageError(str("--task text-to-text needs an encoder-decoder (a tay-*, wu-* or transformer-* preset, or a "
                           "span-corruption checkpoint); '", config.name(), "' is an encoder"));
    }
    const models::Pooling pooling = models::parse_pooling(options.pooling);
    if (pooling != models::Pooling::kCls && definition.kind == TaskKind::kSpan) {
      throw UsageError(str("--pooling ", options.pooling, ": SQuAD's span head scores every position; pooling "
                           "applies to classification and regression"));
    }
    learner = make_encoder_learner(config, start, task, tokenizer, predict, options.max_train_examples, pooling);
  }
  size_t examples = learner->examples();
  const size_t joint_batch = static_cast<size_t>(batch_size) * world;
  int64_t steps_per_epoch = static_cast<int64_t>((examples + joint_batch - 1) / joint_batch);
  int64_t total_steps = steps_per_epoch * epochs;
  int64_t warmup = static_cast<int64_t>(std::llround(options.warmup_ratio * total_steps));
  log_info("finetune: ", definition.name, " (", tasks::task_kind_name(definition.kind),
           config.has_seq2seq() ? ", text-to-text" : "", "), ", examples,
           definition.kind == TaskKind::kSpan ? " training windows" : " training examples", ", dev ",
           task.dev.front().size(), "; lr ", lr, ", batch ", batch_size, world > 1 ? str(" x ", world, " processes") : "",
           ", epochs ", epochs, ", warm-up ", warmup,
           " of ", total_steps, " steps, max length ", max_length, ", ", options.runs, " run(s)");

  create_output_directory(options.model_dir, "--model-dir");
  if (main_rank) {
    remove_earlier_outputs(options.model_dir, DirectoryRun::kFinetuning, finetuning_checkpoints(options.model_dir));
  }
  FinetuneSummary summary;
  summary.metrics_path = (fs::path(options.model_dir) / "metrics.cabert").string();
  summary.checkpoint = (fs::path(options.model_dir) / "best.cabert").string();
  summary.primary_task = task.dev.front().metrics_task;
  std::unique_ptr<io::RecordWriter> metrics_writer;  // rank 0's
  if (main_rank) {
    // A growing file: every record is readable while the run goes on (`cabert inspect` on a running job).
    io::WriterOptions appended;
    appended.appended = true;
    metrics_writer = std::make_unique<io::RecordWriter>(
        summary.metrics_path, "cabert.pb.TaskMetrics",
        std::map<std::string, std::string>{{"task", definition.name}, {"model", model_name(options)}}, appended);
    metrics_writer->flush();
  }
  auto append_metrics = [&](const pb::TaskMetrics& record) {
    if (!main_rank) return;
    metrics_writer->write(record);
    metrics_writer->flush();
  };
  std::string name = model_name(options);
  std::vector<double> run_scores;
  std::vector<std::string> run_checkpoints;
  auto started = std::chrono::steady_clock::now();

  try {
    for (int run = 0; run < options.runs; ++run) {
      uint64_t seed = options.seed + run;
      torch::manual_seed(seed);
      std::mt19937_64 rng(seed);
      torch::nn::Module& model = learner->start_run();
      if (communicator.distributed()) {
        // Rank 0's initial weights everywhere; dropout then draws differently on each rank.
        std::vector<torch::Tensor> state = model.parameters(true);
        for (auto& buffer : model.buffers(true)) state.push_back(buffer);
        communicator.broadcast(state, "the initial parameters");
        if (!main_rank) torch::manual_seed(mix_seed(seed, static_cast<uint64_t>(communicator.rank())));
      }
      AdamWOptions adam;
      adam.lr = lr;
      adam.weight_decay = options.weight_decay;
      AdamW optimizer(model, adam);
      std::vector<torch::Tensor> parameters = model.parameters();
      std::unique_ptr<dist::GradientSync> gradient_sync = communicator.gradient_sync(parameters);

      std::string run_dir = options.runs > 1 ? (fs::path(options.model_dir) / str("run-", run)).string() : "";
      if (!run_dir.empty()) create_output_directory(run_dir, "--model-dir");
      std::string run_checkpoint = run_dir.empty() ? summary.checkpoint : (fs::path(run_dir) / "best.cabert").string();
      double best_score = -1e300;
      std::vector<pb::TaskMetrics> best_records;
      int64_t update = 0;
      UpdateGuard update_guard("finetune", "step", options.max_skipped_updates);
      std::vector<size_t> order(examples);
      std::iota(order.begin(), order.end(), 0);
      for (int epoch = 1; epoch <= epochs; ++epoch) {
        std::shuffle(order.begin(), order.end(), rng);
        Progress progress(str("finetune ", definition.name, options.runs > 1 ? str(" run ", run + 1, "/", options.runs) : "",
                              " epoch ", epoch, "/", epochs),
                          "steps", steps_per_epoch);
        double loss_sum = 0, interval_loss_sum = 0;
        int64_t interval_steps = 0;
        for (int64_t step = 0; step < steps_per_epoch; ++step) {
          // This rank's part of the joint batch order[joint_begin, joint_end).
          const size_t joint_begin = step * joint_batch, joint_end = std::min(examples, joint_begin + joint_batch);
          const size_t begin = std::min(joint_end, joint_begin + communicator.rank() * static_cast<size_t>(batch_size));
          const size_t end = std::min(joint_end, begin + batch_size);
          optimizer.set_lr(linear_warmup_decay(lr, ++update, warmup, total_steps));
          optimizer.zero_grad();
          torch::Tensor loss;
          if (end > begin) {
            // The mean over this rank's examples, weighted by its share of the joint batch (the gradient
            // all-reduce averages over the ranks).
            loss = learner->loss(order, begin, end) *
                   (static_cast<double>((end - begin) * world) / static_cast<double>(joint_end - joint_begin));
          } else {
            loss = learner->loss(order, joint_begin, joint_begin + 1) * 0.0;  // the last joint batch ran short
          }
          gradient_sync->prepare(loss);
          try {
            loss.backward();
          } catch (const std::exception& error) {
            if (!communicator.distributed()) throw;
            communicator.fail("the gradient all-reduce", error);
          }
          // What every rank must agree on: a signal on any rank, and the joint loss.
          std::vector<double> shared{interrupt_requested() != 0 ? 1.0 : 0.0, loss.item<double>() / world};
          communicator.all_reduce_sum(shared, "the step's loss");
          if (shared[0] > 0) throw Interrupted(interrupt_requested() != 0 ? interrupt_requested() : SIGTERM);
          const double value = shared[1];
          if (!std::isfinite(value)) {
            throw Error(str("finetune: the loss became ", value, " at step ", update, "; lower --lr"));
          }
          if (update_guard.allow(clip_gradients(parameters, options.clip_norm), update)) optimizer.step();
          loss_sum += value;
          interval_loss_sum += value;
          ++interval_steps;
          if (options.log_every > 0 && update % options.log_every == 0) {
            pb::TaskMetrics record;
            record.set_kind(pb::TaskMetrics::TRAIN);
            record.set_model(name);
            record.set_task(definition.name);
            record.set_split("train");
            record.set_run(run);
            record.set_seed(seed);
            record.set_epoch(epoch);
            record.set_step(update);
            record.set_train_loss(interval_loss_sum / interval_steps);
            record.set_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
            append_metrics(record);
            interval_loss_sum = 0;
            interval_steps = 0;
          }
          progress.update(step + 1, str("loss ", loss_sum / (step + 1)));
        }
        progress.finish(str("loss ", loss_sum / std::max<int64_t>(steps_per_epoch, 1)));

        std::vector<pb::TaskMetrics> records;
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        for (const auto& dev : task.dev) {
          eval::SplitPredictions predictions = learner->evaluate(dev);
          pb::TaskMetrics record;
          record.set_kind(pb::TaskMetrics::EPOCH);
          record.set_model(name);
          record.set_task(dev.metrics_task);
          record.set_split("dev");
          record.set_data(dev.path);
          record.set_examples(dev.size());
          for (const auto& [metric, value] : predictions.metrics) (*record.mutable_metrics())[metric] = value;
          record.set_score(predictions.score);
          record.set_checkpoint(fs::absolute(run_checkpoint).lexically_normal().string());
          record.set_run(run);
          record.set_seed(seed);
          record.set_epoch(epoch);
          record.set_step(update);
          record.set_train_loss(loss_sum / std::max<int64_t>(steps_per_epoch, 1));
          record.set_seconds(seconds);
          append_metrics(record);
          log_info("finetune: epoch ", epoch, " ", dev.metrics_task, " dev: score ", predictions.score, " (",
                   describe_metrics(predictions.metrics), ")");
          records.push_back(record);
        }
        if (std::isnan(records.front().score())) {
          log_warning("finetune: the ", records.front().task(), " dev score of epoch ", epoch,
                      " is NaN (a correlation of constant predictions?); it ranks below every number");
        }
        // The first epoch always counts, so that every run leaves a checkpoint.
        if (best_records.empty() || eval::better_score(records.front().score(), best_score)) {
          best_score = records.front().score();
          best_records = records;
          pb::CheckpointInfo info;
          info.set_kind("finetune");
          *info.mutable_model() = config;
          info.set_tokenizer(fs::absolute(tokenizer.path()).string());
          info.set_tokenizer_checksum(tokenizer.checksum());
          info.set_step(update);
          for (const auto& [key, value] : task_metadata(definition, source, max_length, squad)) {
            (*info.mutable_metadata())[key] = value;
          }
          (*info.mutable_metadata())["epoch"] = std::to_string(epoch);
          (*info.mutable_metadata())["run"] = std::to_string(run);
          (*info.mutable_metadata())["seed"] = std::to_string(seed);
          (*info.mutable_metadata())["dev_score"] = std::to_string(best_score);
          (*info.mutable_metadata())["initialised_from"] =
              options.preset.empty() ? init.path : "random (" + options.preset + ")";
          learner->describe(&info);
          check_finite_weights(io::module_tensors(model, "model/"), "finetune", str("after epoch ", epoch));
          if (main_rank) {
            io::save_checkpoint(run_checkpoint, info, io::module_tensors(model, "model/"));
            log_info("finetune: best so far, saved ", run_checkpoint);
          }
        }
      }
      for (auto record : best_records) {
        record.set_kind(pb::TaskMetrics::BEST_OF_RUN);
        append_metrics(record);
        summary.best_of_runs.push_back(record);
      }
      run_scores.push_back(best_score);
      run_checkpoints.push_back(run_checkpoint);
    }
  } catch (const Interrupted&) {
    if (main_rank) {
      metrics_writer->close();
      log_info("finetune: stopped; ", definition.name,
               " fine-tuning does not resume (only --task translation does): ", options.model_dir,
               " keeps the records and the best checkpoint of every epoch finished so far; run the command again "
               "to start afresh");
    }
    throw;
  }
  if (main_rank) metrics_writer->close();
  summary.best_run = std::max_element(run_scores.begin(), run_scores.end(), [](double a, double b) {
                       return eval::better_score(b, a);
                     }) - run_scores.begin();
  summary.best_score = run_scores[summary.best_run];
  // A run whose every dev score was NaN failed: the mean and SEM are over the others, and the log says so.
  std::vector<double> numbers;
  for (double score : run_scores) {
    if (!std::isnan(score)) numbers.push_back(score);
  }
  if (numbers.size() < run_scores.size()) {
    log_warning("finetune: ", run_scores.size() - numbers.size(), " of ", run_scores.size(),
                " runs ended with a NaN dev score; the mean is over the other ", numbers.size());
  }
  summary.primary = numbers.empty() ? eval::mean_and_sem(run_scores) : eval::mean_and_sem(numbers);
  if (options.runs > 1 && main_rank) {
    // The best run's checkpoint also goes to the model directory's top level (copied atomically).
    std::string temp = summary.checkpoint + ".tmp";
    fs::copy_file(run_checkpoints[summary.best_run], temp, fs::copy_options::overwrite_existing);
    fs::rename(temp, summary.checkpoint);
  }
  return summary;
}

}  // namespace cabert::train
