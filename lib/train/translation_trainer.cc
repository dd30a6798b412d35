#include "lib/train/translation_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "lib/config/model_config_text.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/numbers.h"
#include "lib/core/progress.h"
#include "lib/core/random.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/eval/translation.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/models/seq2seq_model.h"
#include "lib/ops/device.h"
#include "lib/train/checkpoint.h"
#include "lib/train/losses.h"
#include "lib/train/model_directory.h"
#include "lib/train/optimizer.h"
#include "lib/train/resume_options.h"
#include "lib/train/schedule.h"
#include "lib/train/update_guard.h"

namespace fs = std::filesystem;

namespace cabert::train {
namespace {

// Where training stands; stored in last.cabert's metadata so that --resume continues exactly.
struct Position {
  int epoch = 1;               // 1-based epoch in progress
  int64_t batch = 0;           // batches of that epoch already done
  int64_t update = 0;          // optimizer updates so far
  std::string epoch_rng;       // the shuffling RNG as it was at the start of the epoch
  double loss_sum = 0;         // this epoch's summed per-token losses, for the epoch mean
  // The --log-every window in progress (since the last TRAIN record or the epoch's start): its summed losses.
  double interval_loss_sum = 0;
  int64_t interval_updates = 0;
  double best_bleu = -1;
};

std::string model_name(const TranslationTrainOptions& options) {
  if (!options.name.empty()) return options.name;
  return fs::absolute(options.model_dir).lexically_normal().filename().string();
}

struct DevSet {
  std::vector<data::Seq2SeqExample> examples;
  std::vector<std::string> references;
  std::string path;
};

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
    averaged.emplace_back(name, found == sum.end() ? tensor
                                                   : (found->second / static_cast<double>(paths.size()))
                                                         .to(tensor.scalar_type()));
  }
  return averaged;
}

}  // namespace

TranslationTrainSummary run_translation_training(const TranslationTrainOptions& options) {
  if (options.init.empty() == options.preset.empty()) {
    throw UsageError("translation: give exactly one of --init CKPT (an encoder-decoder checkpoint) or --preset NAME "
                     "(random initialisation, e.g. wu-lightconv-small)");
  }
  if (options.model_dir.empty()) throw UsageError("--model-dir is required");
  if (options.data.empty()) {
    throw UsageError("translation: --data DIR (SPLIT.LANG files) or --data PAIRS.tsv is required");
  }
  if (options.epochs < 1) throw UsageError(str("--epochs: expected at least 1, got ", options.epochs));
  if (options.schedule != "inverse-sqrt" && options.schedule != "linear") {
    throw UsageError(str("--schedule: expected inverse-sqrt or linear, got '", options.schedule, "'"));
  }
  if (options.dev_beam < 1) throw UsageError(str("--dev-beam: expected >= 1, got ", options.dev_beam));
  torch::Device device = ops::select_device(options.device);

  // Model config, tokenizer and the checkpoint we start from.
  io::Checkpoint init;
  pb::ModelConfig config;
  if (!options.preset.empty()) {
    if (options.tokenizer.empty()) {
      throw UsageError("--preset needs --tokenizer MODEL (the joint SentencePiece model)");
    }
    config = config::load_model_config(options.preset, options.set_overrides);
  } else {
    init = io::load_checkpoint(options.init);
    config = init.info.model();
    for (const auto& assignment : options.set_overrides) config::apply_override(&config, assignment);
    config::validate_model_config(config);
  }
  if (!config.has_seq2seq()) {
    throw UsageError(str("translation needs an encoder-decoder; '", config.name(),
                         "' is an encoder (see the wu-*, tay-* and transformer-* presets in --list-presets)"));
  }
  const text::Tokenizer tokenizer = options.preset.empty()
                                        ? eval::open_checkpoint_tokenizer(init.info, init.path, options.tokenizer)
                                        : text::Tokenizer(options.tokenizer);
  if (!options.preset.empty() && config.vocab_size() != tokenizer.vocab_size()) {
    log_info("translation: vocabulary size ", tokenizer.vocab_size(), " from ", tokenizer.path());
    config.set_vocab_size(tokenizer.vocab_size());
  }
  const double smoothing = options.label_smoothing >= 0 ? options.label_smoothing : config.seq2seq().label_smoothing();
  if (smoothing >= 1) throw UsageError(str("--label-smoothing: expected [0, 1), got ", smoothing));

  // The model directory, before anything is read: another kind of run, an earlier translation fine-tuning that
  // only --resume continues, or the checkpoint this run starts from (it would be written over) are refused.
  const std::string last_path = (fs::path(options.model_dir) / "last.cabert").string();
  refuse_other_run(options.model_dir, DirectoryRun::kTranslation);
  const bool resuming = options.resume && fs::exists(last_path);
  if (!resuming) {
    const std::vector<fs::path> earlier = translation_checkpoints(options.model_dir);
    if (!options.resume) refuse_fresh_start(options.model_dir, earlier);
    refuse_start_among_outputs(options.model_dir, DirectoryRun::kTranslation, init.path, earlier);
  }

  // Data.
  tasks::TranslationFiles files = options.files;
  files.read.max_pairs = options.max_train_examples;
  tasks::ParallelData train_pairs = tasks::read_translation_split(options.data, options.train_split, files);
  if (train_pairs.pairs.empty()) throw DataError(str(train_pairs.source_path, ": expected training pairs, got none"));
  tasks::EncodeStats stats;
  std::vector<data::Seq2SeqExample> train =
      tasks::encode_pairs(train_pairs, tokenizer, options.max_source_tokens, options.max_target_tokens, &stats);
  files.read.max_pairs = options.max_dev_examples;
  tasks::ParallelData dev_pairs = options.dev.empty()
                                      ? tasks::read_translation_split(options.data, options.dev_split, files)
                                      : tasks::read_translation_split(options.dev, "", files);
  if (dev_pairs.pairs.empty()) throw DataError(str(dev_pairs.source_path, ": expected dev pairs, got none"));
  DevSet dev;
  dev.path = dev_pairs.source_path;
  dev.examples = tasks::encode_pairs(dev_pairs, tokenizer, options.max_source_tokens, options.max_target_tokens);
  for (const auto& pair : dev_pairs.pairs) dev.references.push_back(pair.target);
  if (stats.truncated_sources + stats.truncated_targets > 0) {
    log_info("translation: truncated ", stats.truncated_sources, " sources and ", stats.truncated_targets,
             " targets to ", options.max_source_tokens, "/", options.max_target_tokens, " tokens");
  }
  std::vector<std::vector<size_t>> batches = data::token_budget_batches(train, options.max_tokens, options.max_rows);
  const int64_t steps_per_epoch = static_cast<int64_t>(batches.size());
  const int64_t total_steps = steps_per_epoch * options.epochs;
  const int64_t warmup = options.warmup_steps >= 0 ? options.warmup_steps
                                                   : std::min<int64_t>(4000, std::llround(0.1 * total_steps));
  const std::string task_name = tasks::translation_task_name(files);
  log_info("translation: ", task_name, ", ", train.size(), " training pairs in ", steps_per_epoch,
           " batches of <= ", options.max_tokens, " tokens, dev ", dev.examples.size(), "; lr ", options.lr, " (",
           options.schedule, ", warm-up ", warmup, " of ", total_steps, " updates), label smoothing ", smoothing,
           ", ", options.epochs, " epochs");

  // Model and optimizer.
  create_output_directory(options.model_dir, "--model-dir");
  // --resume without last.cabert starts from scratch: what an earlier start left (a best or epoch checkpoint
  // from before its first last.cabert) is not this run's.
  if (!resuming) {
    remove_earlier_outputs(options.model_dir, DirectoryRun::kTranslation, translation_checkpoints(options.model_dir));
  }
  uint64_t seed = options.seed;
  torch::manual_seed(seed);
  models::Seq2SeqModel model(config);
  if (!options.init.empty()) io::restore_module(*model, init, "model/", "");
  model->to(device);
  model->train();
  AdamWOptions adam;
  adam.lr = options.lr;
  adam.beta2 = 0.98;
  adam.eps = 1e-8;
  adam.weight_decay = options.weight_decay;
  AdamW optimizer(*model, adam);
  std::vector<torch::Tensor> parameters = model->parameters();
  Position position;
  std::mt19937_64 rng(seed);
  position.epoch_rng = rng_state(rng);
  if (resuming) {
    io::Checkpoint last = io::load_checkpoint(last_path);
    eval::check_tokenizer_matches(tokenizer, last.info, last_path);
    if (last.info.model().SerializeAsString() != config.SerializeAsString()) {
      throw UsageError(
          str("--resume: ", last_path, " holds another model config; resume with the same --preset/--set"));
    }
    io::restore_module(*model, last, "model/", "");
    optimizer.load_state(io::tensors_with_prefix(last, "optimizer/"), last_path);
    const auto& m = last.info.metadata();
    auto entry = [&](const char* key) {
      auto found = m.find(key);
      if (found == m.end()) throw DataError(str(last_path, ": the checkpoint lacks the '", key, "' entry"));
      return std::make_pair(found->second, str(last_path, ": metadata '", key, "'"));
    };
    auto integer = [&](const char* key) {
      auto [text, where] = entry(key);
      return parse_integer(text, 0, std::numeric_limits<int64_t>::max(), where);
    };
    auto number = [&](const char* key) {
      auto [text, where] = entry(key);
      return parse_finite(text, where);
    };
    position.epoch = static_cast<int>(std::min<int64_t>(integer("resume_epoch"), 1 << 30));
    position.batch = integer("resume_batch");
    position.update = integer("resume_update");
    position.epoch_rng = entry("resume_epoch_rng").first;
    position.loss_sum = number("resume_loss_sum");
    position.best_bleu = number("best_bleu");
    // Absent from the checkpoints of earlier versions: the window then restarts at the resume.
    if (m.count("resume_interval_updates") > 0) {
      position.interval_updates = integer("resume_interval_updates");
      position.interval_loss_sum = number("resume_interval_loss_sum");
    }
    set_torch_cpu_rng_state(last.info.torch_rng_state());
    check_resume_options(last_path, options.allow_changed_options,
                         position.epoch > options.epochs ||
                             (position.epoch == options.epochs && position.batch >= steps_per_epoch));
    log_info("translation: resuming from ", last_path, " at epoch ", position.epoch, ", batch ", position.batch,
             " (update ", position.update, ")");
  } else if (options.resume) {
    log_info("translation: --resume: no ", last_path, ", starting from scratch");
  }

  auto info_for = [&](int epoch) {
    pb::CheckpointInfo info;
    info.set_kind("finetune");
    *info.mutable_model() = config;
    info.set_tokenizer(fs::absolute(tokenizer.path()).string());
    info.set_tokenizer_checksum(tokenizer.checksum());
    info.set_step(position.update);
    auto& m = *info.mutable_metadata();
    m["task"] = "translation";
    m["task_name"] = task_name;
    m["source_lang"] = files.source_lang;
    m["target_lang"] = files.target_lang;
    m["max_source_tokens"] = std::to_string(options.max_source_tokens);
    m["max_target_tokens"] = std::to_string(options.max_target_tokens);
    m["epoch"] = std::to_string(epoch);
    m["initialised_from"] = options.preset.empty() ? init.path : "random (" + options.preset + ")";
    return info;
  };
  auto save_last = [&] {
    check_finite_weights(io::module_tensors(*model, "model/"), "translation", str("at update ", position.update));
    pb::CheckpointInfo info = info_for(position.epoch);
    auto& m = *info.mutable_metadata();
    m["resume_epoch"] = std::to_string(position.epoch);
    m["resume_batch"] = std::to_string(position.batch);
    m["resume_update"] = std::to_string(position.update);
    m["resume_epoch_rng"] = position.epoch_rng;
    m["resume_loss_sum"] = exact_number(position.loss_sum);
    m["resume_interval_loss_sum"] = exact_number(position.interval_loss_sum);
    m["resume_interval_updates"] = std::to_string(position.interval_updates);
    m["best_bleu"] = exact_number(position.best_bleu);
    info.set_torch_rng_state(torch_cpu_rng_state());
    io::NamedTensors tensors = io::module_tensors(*model, "model/");
    for (auto& [name, tensor] : optimizer.state()) tensors.emplace_back("optimizer/" + name, tensor);
    io::save_checkpoint(last_path, info, tensors);
  };

  TranslationTrainSummary summary;
  summary.checkpoint = (fs::path(options.model_dir) / "best.cabert").string();
  summary.metrics_path = (fs::path(options.model_dir) / "metrics.cabert").string();
  const std::string name = model_name(options);
  // A resumed run keeps the records of the epochs (and training intervals) before it, and its clock goes on
  // from theirs. The file grows as records are appended: readable while the run goes on; the
  // new file replaces the old one at its first flush, so the old records stream across (nothing held in memory).
  io::WriterOptions appended;
  appended.appended = true;
  io::RecordWriter metrics(summary.metrics_path, "cabert.pb.TaskMetrics", {{"task", task_name}, {"model", name}},
                           appended);
  double seconds_before = 0;
  if (position.update > 0 && fs::exists(summary.metrics_path)) {
    io::RecordReader reader(summary.metrics_path);
    reader.expect("cabert.pb.TaskMetrics");
    pb::TaskMetrics record;
    while (reader.next(&record)) {
      const bool epoch_done = record.kind() == pb::TaskMetrics::EPOCH && static_cast<int>(record.epoch()) < position.epoch;
      const bool logged_before = record.kind() == pb::TaskMetrics::TRAIN &&
                                 record.step() <= static_cast<uint64_t>(position.update);
      if (!epoch_done && !logged_before) continue;
      metrics.write(record);
      seconds_before = std::max(seconds_before, record.seconds());
      if (epoch_done && record.score() >= summary.best.score()) summary.best = record;
    }
  }
  metrics.flush();
  auto append_metrics = [&](const pb::TaskMetrics& record) {
    metrics.write(record);
    metrics.flush();
  };
  auto record_for = [&](const DevResult& result, int epoch, double train_loss, const std::string& checkpoint) {
    pb::TaskMetrics record;
    record.set_kind(pb::TaskMetrics::EPOCH);
    record.set_model(name);
    record.set_task(task_name);
    record.set_split("dev");
    record.set_data(dev.path);
    record.set_examples(dev.examples.size());
    (*record.mutable_metrics())["bleu"] = result.scores.bleu.score / 100;
    (*record.mutable_metrics())["chrf"] = result.scores.chrf.score / 100;
    record.set_score(result.scores.bleu.score);
    record.set_checkpoint(fs::absolute(checkpoint).lexically_normal().string());
    record.set_seed(seed);
    record.set_epoch(epoch);
    record.set_step(position.update);
    record.set_train_loss(train_loss);
    return record;
  };

  const auto started = std::chrono::steady_clock::now();
  auto run_seconds = [&] {
    return seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<std::string> epoch_checkpoints;
  auto epoch_checkpoint = [&](int epoch) {
    return (fs::path(options.model_dir) / str("epoch-", epoch, ".cabert")).string();
  };
  // A resumed run averages the epochs before the stop too, as the uninterrupted run would: they are on disk.
  if (resuming && options.average_last >= 2) {
    for (int epoch = std::max(1, position.epoch - options.average_last); epoch < position.epoch; ++epoch) {
      if (fs::exists(epoch_checkpoint(epoch))) {
        epoch_checkpoints.push_back(epoch_checkpoint(epoch));
      } else {
        log_warning("translation: --resume: ", epoch_checkpoint(epoch), " is gone; the average of the last ",
                    options.average_last, " epochs will lack epoch ", epoch);
      }
    }
  }
  UpdateGuard update_guard("translation", "update", options.max_skipped_updates);
  for (; position.epoch <= options.epochs; ++position.epoch) {
    std::mt19937_64 epoch_rng;
    set_rng_state(epoch_rng, position.epoch_rng);
    std::vector<size_t> order(batches.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), epoch_rng);
    Progress progress(str("translation epoch ", position.epoch, "/", options.epochs), "batches", steps_per_epoch);
    int64_t tokens = 0;
    const auto epoch_started = std::chrono::steady_clock::now();
    for (; position.batch < steps_per_epoch; ++position.batch) {
      if (interrupt_requested() != 0) {
        save_last();
        log_info("translation: stopped at epoch ", position.epoch, ", batch ", position.batch,
                 "; continue with --resume (", last_path, ")");
        metrics.close();
        throw Interrupted(interrupt_requested());
      }
      data::Seq2SeqBatch batch = data::make_seq2seq_batch(train, batches[order[position.batch]]);
      ++position.update;
      optimizer.set_lr(options.schedule == "linear"
                           ? linear_warmup_decay(options.lr, position.update, warmup, total_steps)
                           : inverse_sqrt(options.lr, position.update, warmup));
      optimizer.zero_grad();
      torch::Tensor logits = model->forward(batch.source.to(device), batch.source_mask.to(device),
                                            batch.target_in.to(device), batch.target_mask.to(device));
      SmoothedLoss loss = label_smoothed_cross_entropy(logits, batch.target_out.to(device), smoothing);
      // The loss is checked before anything is updated.
      const double value = loss.loss.item<double>() / static_cast<double>(batch.target_tokens);
      if (!std::isfinite(value)) {
        throw Error(str("translation: the loss became ", value, " at update ", position.update, "; lower --lr"));
      }
      (loss.loss / static_cast<double>(batch.target_tokens)).backward();
      if (update_guard.allow(clip_gradients(parameters, options.clip_norm), position.update)) optimizer.step();
      position.loss_sum += value;
      position.interval_loss_sum += value;
      ++position.interval_updates;
      if (options.log_every > 0 && position.update % options.log_every == 0) {
        pb::TaskMetrics record;
        record.set_kind(pb::TaskMetrics::TRAIN);
        record.set_model(name);
        record.set_task(task_name);
        record.set_split("train");
        record.set_seed(seed);
        record.set_epoch(position.epoch);
        record.set_step(position.update);
        record.set_train_loss(position.interval_loss_sum / position.interval_updates);
        record.set_seconds(run_seconds());
        append_metrics(record);
        position.interval_loss_sum = 0;
        position.interval_updates = 0;
      }
      tokens += batch.source_tokens + batch.target_tokens;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_started).count();
      char extra[128];
      std::snprintf(extra, sizeof extra, "loss %.3f, lr %.3g, %s tok/s", position.loss_sum / (position.batch + 1),
                    optimizer.lr(), human_count(tokens / std::max(seconds, 1e-9)).c_str());
      progress.update(position.batch + 1, extra);
      if (options.after_step) options.after_step(position.update);
    }
    const double train_loss = position.loss_sum / std::max<int64_t>(steps_per_epoch, 1);
    progress.finish(str("loss ", train_loss));

    DevResult result = evaluate_dev(model, dev, tokenizer, device, options.dev_beam, options.max_tokens);
    log_info("translation: epoch ", position.epoch, " dev: nll/token ", result.nll_per_token, ", ",
             eval::format_bleu(result.scores.bleu), ", ", eval::format_chrf(result.scores.chrf));
    const int epoch = position.epoch;
    check_finite_weights(io::module_tensors(*model, "model/"), "translation", str("after epoch ", epoch));
    pb::TaskMetrics record = record_for(result, epoch, train_loss, summary.checkpoint);
    record.set_seconds(run_seconds());
    append_metrics(record);
    summary.epochs.push_back(record);
    if (options.average_last >= 2) {
      const std::string path = epoch_checkpoint(epoch);
      io::save_checkpoint(path, info_for(epoch), io::module_tensors(*model, "model/"));
      epoch_checkpoints.push_back(path);
      while (epoch_checkpoints.size() > static_cast<size_t>(options.average_last)) {
        fs::remove(epoch_checkpoints.front());
        epoch_checkpoints.erase(epoch_checkpoints.begin());
      }
    }
    if (result.scores.bleu.score > position.best_bleu) {
      position.best_bleu = result.scores.bleu.score;
      summary.best = record;
      pb::CheckpointInfo info = info_for(epoch);
      (*info.mutable_metadata())["dev_bleu"] = str(result.scores.bleu.score);
      io::save_checkpoint(summary.checkpoint, info, io::module_tensors(*model, "model/"));
      log_info("translation: best so far, saved ", summary.checkpoint);
    }
    // The next epoch starts from here: a --resume after this point replays nothing.
    position.batch = 0;
    position.loss_sum = 0;
    position.interval_loss_sum = 0;
    position.interval_updates = 0;
    position.epoch_rng = rng_state(epoch_rng);
    ++position.epoch;
    save_last();
    --position.epoch;
  }

  if (summary.best.epoch() > 0) {
    pb::TaskMetrics best = summary.best;
    best.set_kind(pb::TaskMetrics::BEST_OF_RUN);
    append_metrics(best);
  }
  // The last whole epoch: --epochs, or the last one before the stop when a resume with --epochs lowered past it
  // trained none (the average then takes the epochs before the stop, and the resumed metrics get its record again).
  const int last_epoch = position.epoch - 1;
  if (epoch_checkpoints.size() >= 2) {
    summary.averaged_checkpoint = (fs::path(options.model_dir) / "averaged.cabert").string();
    pb::CheckpointInfo info = info_for(last_epoch);
    (*info.mutable_metadata())["averaged"] = std::to_string(epoch_checkpoints.size()) + " epochs";
    io::save_checkpoint(summary.averaged_checkpoint, info, average_checkpoints(epoch_checkpoints));
    eval::LoadedSeq2SeqModel averaged = eval::load_seq2seq_model(summary.averaged_checkpoint, device);
    DevResult result = evaluate_dev(averaged.model, dev, tokenizer, device, options.dev_beam, options.max_tokens);
    log_info("translation: average of the last ", epoch_checkpoints.size(), " epochs, dev: ",
             eval::format_bleu(result.scores.bleu), ", ", eval::format_chrf(result.scores.chrf));
    summary.averaged = record_for(result, last_epoch, 0, summary.averaged_checkpoint);
    summary.averaged.set_kind(pb::TaskMetrics::EVALUATION);
    append_metrics(summary.averaged);
  }
  metrics.close();
  return summary;
}

}  // namespace cabert::train
