#include "lib/train/pretrainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <utility>

#include "formats/metrics.pb.h"
#include "kernels/seeded_generator.h"
#include "lib/config/model_config_text.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/progress.h"
#include "lib/core/random.h"
#include "lib/data/pretraining_batches.h"
#include "lib/dist/communicator.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/io/record_file.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/summary.h"
#include "lib/ops/device.h"
#include "lib/ops/mixed_precision.h"
#include "lib/train/checkpoint.h"
#include "lib/train/metrics_log.h"
#include "lib/train/model_directory.h"
#include "lib/train/optimizer.h"
#include "lib/train/rank_states.h"
#include "lib/train/resume_options.h"
#include "lib/train/schedule.h"
#include "lib/train/tensorboard_pictures.h"
#include "lib/train/training_loop.h"
#include "lib/train/update_guard.h"

namespace cabert::train {
namespace {

namespace fs = std::filesystem;

// Every held-out example draws its masks from its own seed, so that every evaluation of a run sees the same
// masks whatever the batch size or the number of ranks. Rank r evaluates examples r, r + W, ...; the metric
// sums are added over the ranks.
std::map<std::string, double> evaluate(Objectives& objectives, const std::vector<pb::PretrainingExample>& examples,
                                       const data::ExampleStream& stream, int64_t batch_size, Objective objective,
                                       uint64_t seed, dist::Communicator& communicator) {
  if (examples.empty()) return {};
  torch::NoGradGuard no_grad;
  objectives.module().eval();
  // ELECTRA's sampling must not disturb training: every generator torch::manual_seed would seed (the CPU's and
  // each CUDA device's; restoring the CPU's alone left CUDA's restarting from this seed after every evaluation).
  const kernels::SeededGenerators seeded(mix_seed(seed ^ 0x5eed, static_cast<uint64_t>(communicator.rank())));
  std::mt19937_64 shared_generator(seed);  // not drawn from: every row has its own seed
  std::vector<size_t> mine;
  for (size_t i = communicator.rank(); i < examples.size(); i += communicator.world_size()) mine.push_back(i);
  MetricSums batch_sums;
  for (size_t start = 0; start < mine.size(); start += batch_size) {
    std::vector<pb::PretrainingExample> slice;
    std::vector<uint64_t> seeds;
    for (size_t k = start; k < std::min(mine.size(), start + batch_size); ++k) {
      slice.push_back(examples[mine[k]]);
      seeds.push_back(stream.held_out_seed(mine[k]));
    }
    data::Batch batch = data::make_batch(slice);
    batch.row_seeds = std::move(seeds);
    batch_sums.add(objectives.compute(batch, shared_generator).sums);
  }
  std::map<std::string, double> sums = batch_sums.read();
  objectives.module().train();
  if (communicator.distributed()) {
    // Every rank adds the same names, whether or not its share of the held-out examples produced them.
    for (const auto& name : metric_sum_names(objective)) sums.try_emplace(name, 0.0);
    std::vector<double> values;
    for (const auto& [key, value] : sums) values.push_back(value);
    communicator.all_reduce_sum(values, "the held-out evaluation's sums");
    size_t i = 0;
    for (auto& [key, value] : sums) value = values[i++];
  }
  return summarise(sums, objective);
}

struct CorpusTokenizer {
  std::string tokenizer, checksum;
  int64_t vocab_size = 0;  // 0: not recorded
};

// The shards of one build-corpus run are PREFIX-<i>-of-<n> (lib/data/corpus_builder.h). A shard given twice, or
// the shards of two runs under one PREFIX with different --shards (a rebuild that left the old set: `corpus-*`
// matches both), would repeat examples and leak held-out ones into training: refused. Sets under different
// prefixes (two corpora built apart) are fine.
void check_shard_sets(const std::vector<std::string>& shards) {
  static const std::regex numbered(R"((.*)-([0-9]+)-of-([0-9]+))");
  std::map<std::string, std::string> seen;                                   // canonical path -> as given
  std::map<std::string, std::pair<std::string, std::string>> set_of_prefix;  // prefix -> (count, a shard)
  for (const auto& shard : shards) {
    if (shard == "-") {
      throw UsageError("--corpus -: pre-training reads its corpus more than once (the held-out examples, then every "
                       "epoch), which a pipe cannot give: write it to a file (build-corpus -o FILE)");
    }
    std::error_code error;
    fs::path canonical = fs::weakly_canonical(shard, error);
    const std::string key = error ? shard : canonical.string();
    if (auto [it, inserted] = seen.emplace(key, shard); !inserted) {
      throw UsageError(
          str("--corpus: ", shard, " is given twice (also as ", it->second, "); each shard must be given once"));
    }
    std::smatch match;
    const std::string name = fs::path(shard).filename().string();
    if (!std::regex_match(name, match, numbered)) continue;
    const std::string prefix = (fs::path(shard).parent_path() / match[1].str()).string();
    auto [it, inserted] = set_of_prefix.emplace(prefix, std::make_pair(match[3].str(), shard));
    if (!inserted && it->second.first != match[3].str()) {
      throw UsageError(str("--corpus: ", shard, " and ", it->second.second, " are shards of two build-corpus runs ",
                           "under one name (", std::stoi(match[3].str()), " and ", std::stoi(it->second.first),
                           " shards; a rebuild that left the old set?): give the shards of one run"));
    }
  }
}

// What build-corpus recorded about the tokenizer, the same in every shard (each one is checked: shards of
// different tokenizers would train on ids that mean different pieces). Each shard is also checked whole (its
// frames up to the footer, without decoding them): a truncated one is refused now, not hours into the run.
CorpusTokenizer corpus_tokenizer(const std::vector<std::string>& shards) {
  check_shard_sets(shards);
  CorpusTokenizer first;
  for (size_t i = 0; i < shards.size(); ++i) {
    io::RecordReader reader(shards[i]);
    const auto& metadata = reader.header().metadata();
    auto value = [&](const char* key) {
      auto found = metadata.find(key);
      return found == metadata.end() ? std::string() : found->second;
    };
    CorpusTokenizer shard{value("tokenizer"), value("tokenizer_checksum"), 0};
    if (const std::string vocab = value("vocab_size"); !vocab.empty()) {
      char* end = nullptr;
      const long long parsed = std::strtoll(vocab.c_str(), &end, 10);
      if (*end != '\0' || parsed <= 0 || parsed > (int64_t{1} << 31) - 1) {
        throw DataError(
            str(reader.name(), ": header metadata vocab_size '", vocab, "': expected a positive 32-bit integer"));
      }
      shard.vocab_size = parsed;
    }
    if (i == 0) {
      first = shard;
      // A corpus of an earlier cabert recorded the path as given; checkpoints record it absolute.
      std::error_code error;
      if (!first.tokenizer.empty() && fs::exists(first.tokenizer, error)) {
        first.tokenizer = fs::absolute(first.tokenizer).lexically_normal().string();
      }
    } else if (shard.checksum != first.checksum || shard.vocab_size != first.vocab_size) {
      throw DataError(str(reader.name(), ": built with tokenizer ", shard.tokenizer, " (checksum ",
                          shard.checksum.empty() ? "none" : shard.checksum, ", vocab_size ", shard.vocab_size,
                          "), but ", shards[0], " with ", first.tokenizer, " (checksum ",
                          first.checksum.empty() ? "none" : first.checksum, ", vocab_size ", first.vocab_size,
                          "); every --corpus shard must come from one tokenizer"));
    }
    reader.skip_to_end();
  }
  return first;
}

double default_lr(const pb::ModelConfig& config, Objective objective) {
  const bool base = config.hidden_size() >= 768;
  if (!base) return 3e-4;
  return objective == Objective::kElectra ? 2e-4 : 1e-4;
}

std::string format_values(const std::map<std::string, double>& values) {
  std::string out;
  for (const auto& [k, v] : values) out += str(out.empty() ? "" : ", ", k, " ", v);
  return out;
}

// Refuses what would spoil the model directory, before anything is written there.
void prepare_model_directory(const PretrainOptions& options) {
  // A fresh run into a model directory that holds an earlier one would replace its metrics.cabert and, through
  // --keep-checkpoints, prune its own checkpoints while keeping the earlier run's later-numbered ones (which
  // --resume and `--init DIR` would then pick).
  refuse_other_run(options.model_dir, DirectoryRun::kPretraining);
  if (!options.resume) {
    std::vector<fs::path> earlier;
    for (const auto& [step, path] : io::list_checkpoints(options.model_dir)) earlier.emplace_back(path);
    refuse_fresh_start(options.model_dir, earlier);
  }
  create_output_directory(options.model_dir, "--model-dir");
  // What a killed run was writing when it died.
  if (size_t removed = remove_stale_temporaries(options.model_dir)) {
    log_info("pretrain: removed ", removed, " temporary file(s) a killed run left in ", options.model_dir);
  }
}

// The checkpoint --resume continues from (nullptr: a fresh start), with the config it fixes.
std::unique_ptr<io::Checkpoint> find_resume(const PretrainOptions& options, const CorpusTokenizer& corpus,
                                            dist::Communicator& communicator, pb::ModelConfig* config) {
  if (!options.resume) return nullptr;
  std::unique_ptr<io::Checkpoint> resumed = load_latest_checkpoint(options.model_dir, communicator);
  if (!resumed) {
    log_info("pretrain: --resume: no checkpoint in ", options.model_dir, ", starting from scratch");
    return nullptr;
  }
  *config = resumed->info.model();
  const int64_t step = static_cast<int64_t>(resumed->info.step());
  if (!resumed->info.tokenizer_checksum().empty() && !corpus.checksum.empty() &&
      resumed->info.tokenizer_checksum() != corpus.checksum) {
    throw UsageError(
        str("--resume: the corpus was tokenized with another tokenizer than the checkpoint ", resumed->path));
  }
  check_resume_options(resumed->path, options.allow_changed_options, step >= options.steps);
  log_info("pretrain: resuming from ", resumed->path, " at step ", step);
  return resumed;
}

// Pre-training in the one loop: each micro-batch draws batch_size examples of this rank's share of the corpus;
// the objective's loss is weighted by this rank's share of the joint batch's counted terms.
class PretrainLearner : public StepLearner {
 public:
  PretrainLearner(Objectives& objectives, data::ExampleStream& stream, std::mt19937_64& rng, int64_t batch_size,
                  Objective objective, dist::Communicator& communicator)
      : objectives_(objectives),
        stream_(stream),
        rng_(rng),
        batch_size_(batch_size),
        objective_(objective),
        communicator_(communicator) {}

  MicroBatch micro_batch(int /*micro*/, int accumulate) override {
    std::vector<pb::PretrainingExample> examples;
    std::vector<uint64_t> seeds(static_cast<size_t>(batch_size_));
    for (int64_t i = 0; i < batch_size_; ++i) examples.push_back(stream_.next(&seeds[static_cast<size_t>(i)]));
    data::Batch batch = data::make_batch(examples);
    batch.row_seeds = std::move(seeds);
    StepOutput out = objectives_.compute(batch, rng_);
    std::vector<double> counts;
    for (const auto& term : out.terms) counts.push_back(term.count);
    communicator_.all_reduce_sum(counts, "the masked-token counts");
    MicroBatch micro;
    micro.loss = joint_batch_loss(out, counts, communicator_.world_size()) / static_cast<double>(accumulate);
    micro.sums = std::move(out.sums);
    micro.tokens = batch.tokens;
    return micro;
  }

  std::vector<std::string> sum_names() const override { return metric_sum_names(objective_); }

 private:
  Objectives& objectives_;
  data::ExampleStream& stream_;
  std::mt19937_64& rng_;
  int64_t batch_size_;
  Objective objective_;
  dist::Communicator& communicator_;
};

// What a pre-training run holds while it goes on.
struct PretrainState {
  const PretrainOptions& options;
  dist::Communicator& communicator;
  pb::ModelConfig config;
  CorpusTokenizer corpus;
  Objectives& objectives;
  Optimizer& optimizer;
  data::ExampleStream& stream;
  std::mt19937_64& rng;
  double peak_lr = 0;
  int64_t warmup = 0;
};

// Collective: every rank hands rank 0 its state; rank 0 alone writes checkpoint-<step>.cabert and keeps the last K.
std::string save_checkpoint_at(PretrainState& state, int64_t at_step) {
  const PretrainOptions& options = state.options;
  torch::nn::Module& module = state.objectives.module();
  const int world = state.communicator.world_size();
  // Every rank holds the same weights, so every rank refuses alike.
  check_finite_weights(io::module_tensors(module, "model/"), "pretrain", str("at step ", at_step));
  std::vector<pb::RankState> states =
      gather_rank_states(state.communicator, capture_rank_state(state.stream, state.rng), at_step);
  std::string path = io::checkpoint_path(options.model_dir, at_step);
  if (state.communicator.is_main()) {
    pb::CheckpointInfo info;
    info.set_kind("pretrain");
    *info.mutable_model() = state.config;
    info.set_tokenizer(state.corpus.tokenizer);
    info.set_tokenizer_checksum(state.corpus.checksum);
    info.set_step(at_step);
    record_rank_states(states, world, &info);
    for (const auto& c : options.corpus) info.add_corpus(c);
    auto& meta = *info.mutable_metadata();
    meta["objective"] = objective_name(options.objective);
    if (options.objective == Objective::kSpanCorruption) {
      meta["noise_density"] = str(options.noise_density);
      meta["mean_noise_span_length"] = str(options.mean_noise_span_length);
    }
    meta["total_steps"] = std::to_string(options.steps);
    meta["batch_size"] = std::to_string(options.batch_size * options.accumulate * world);
    meta["processes"] = std::to_string(world);
    meta["peak_lr"] = str(state.peak_lr);
    meta["warmup_steps"] = std::to_string(state.warmup);
    meta["seed"] = std::to_string(options.seed);
    NamedTensors tensors = io::module_tensors(module, "model/");
    for (auto& [name, tensor] : state.optimizer.state()) tensors.emplace_back("optimizer/" + name, tensor);
    io::save_checkpoint(path, info, tensors);
    auto all = io::list_checkpoints(options.model_dir);
    for (size_t i = 0; i + options.keep_checkpoints < all.size(); ++i) fs::remove(all[i].second);
  }
  state.communicator.barrier(str("saving checkpoint ", at_step));  // no rank leaves before the file is there
  return path;
}

StepSettings step_settings(const PretrainState& state) {
  const PretrainOptions& options = state.options;
  StepSettings settings;
  settings.job = "pretrain";
  settings.accumulate = static_cast<int>(options.accumulate);
  settings.amp = options.amp;
  settings.clip_norm = options.clip_norm;
  settings.max_skipped_updates = options.max_skipped_updates;
  const double peak = state.peak_lr;
  const int64_t warmup = state.warmup, steps = options.steps;
  settings.learning_rate = [peak, warmup, steps](int64_t update) {
    return linear_warmup_decay(peak, update, warmup, steps);
  };
  dist::Communicator& communicator = state.communicator;
  const std::string model_dir = options.model_dir;
  settings.non_finite_loss = [&communicator, model_dir](double loss, int64_t update, int ranks) {
    const int world = communicator.world_size();
    auto existing = communicator.is_main() ? io::list_checkpoints(model_dir) : decltype(io::list_checkpoints("")){};
    return str("pretrain: non-finite loss (", loss, ") at step ", update,
               world > 1 ? str(" on ", ranks, " of ", world, " ranks") : "", "; stopping. ",
               !communicator.is_main() ? std::string("")
               : existing.empty()      ? std::string("No checkpoint was written yet.")
                                       : str("The last good checkpoint is ", existing.back().second));
  };
  settings.before_update = options.before_update;
  return settings;
}

// The values of a step's "train" record.
std::map<std::string, double> step_values(const UpdateReport& report, Objective objective, int64_t skipped) {
  auto values = summarise(report.sums, objective);
  values["loss"] = report.loss;
  values["lr"] = report.lr;
  values["grad_norm"] = report.grad_norm;
  if (skipped > 0) values["skipped_updates"] = static_cast<double>(skipped);
  values["tokens_per_second"] = static_cast<double>(report.tokens) / std::max(report.seconds, 1e-9);
  values["tokens"] = static_cast<double>(report.tokens);
  return values;
}

// The steps from `step` to options.steps: held-out evaluation every --eval-every steps and at the end, a
// checkpoint every --save-every steps, at the end, and when a signal on any rank stops every rank.
void train_steps(PretrainState& state, int64_t step, const std::vector<pb::PretrainingExample>& held_out,
                 MetricsLog* metrics, PretrainResult& result) {
  const PretrainOptions& options = state.options;
  torch::nn::Module& module = state.objectives.module();
  PretrainLearner learner(state.objectives, state.stream, state.rng, options.batch_size, options.objective,
                          state.communicator);
  UpdateStep update_step(module, state.optimizer, ops::select_device(options.device), step_settings(state),
                         state.communicator, step);
  module.train();
  // Counted from this process's first step so that the rate and ETA stay right after --resume.
  const int64_t first_step = step;
  Progress progress(str("pretrain (from step ", first_step, ")"), "steps",
                    static_cast<uint64_t>(options.steps - first_step));
  const RunClock clock(metrics ? metrics->carried_wall_seconds() : 0.0);
  double tokens_total = 0, seconds_total = 0;
  while (step < options.steps) {
    const UpdateReport report = update_step.run(learner);
    step = report.update;
    ++result.steps_done;
    tokens_total += static_cast<double>(report.tokens), seconds_total += report.seconds;
    result.last_loss = report.loss;
    if (metrics)
      metrics->add("train", step, clock.seconds(), step_values(report, options.objective, update_step.skipped()));
    if (!options.quiet_progress) {
      char extra[160];
      std::snprintf(extra, sizeof(extra), "loss %.4f, lr %.3g, %s tok/s", report.loss, report.lr,
                    human_count(static_cast<double>(report.tokens) / std::max(report.seconds, 1e-9)).c_str());
      progress.update(static_cast<uint64_t>(step - first_step), extra);
    }
    if (options.after_step) options.after_step(step);
    const bool last = step == options.steps;
    if ((options.eval_every > 0 && step % options.eval_every == 0) || last) {
      auto eval = evaluate(state.objectives, held_out, state.stream, options.batch_size, options.objective,
                           options.seed, state.communicator);
      if (!eval.empty()) {
        if (metrics) metrics->add("eval", step, clock.seconds(), eval);
        if (metrics && metrics->tensorboard()) log_kernel_pictures(*metrics->tensorboard(), state.config, module, step);
        result.last_eval = eval;
        log_info("pretrain: step ", step, " eval (", held_out.size(), " held-out examples): ", format_values(eval));
      }
    }
    // A signal on any rank stops every rank at this step, after one checkpoint.
    const int signal = stop_signal(state.communicator);
    if (last || signal != 0 || (options.save_every > 0 && step % options.save_every == 0)) {
      result.last_checkpoint = save_checkpoint_at(state, step);
      log_debug("pretrain: saved ", result.last_checkpoint);
    }
    if (signal != 0 && !last) {
      log_info("pretrain: stopped at step ", step, " by signal ", signal, "; resume with --resume from ",
               result.last_checkpoint);
      throw Interrupted(signal);
    }
  }
  progress.finish(str("loss ", result.last_loss));
  result.final_step = step;
  result.tokens_per_second = tokens_total / std::max(seconds_total, 1e-9);
}

}  // namespace

std::string describe_pretraining_model(const pb::ModelConfig& config, Objective objective) {
  if (config.has_seq2seq()) return models::module_tree(*models::Seq2SeqModel(config), "model");
  check_objective_fits(config, objective);
  if (objective == Objective::kMlm) return models::module_tree(*models::MlmModel(config), "model");
  return models::module_tree(*models::ElectraModel(config), "model");
}

PretrainResult run_pretraining(const PretrainOptions& options) {
  if (options.steps <= 0) throw UsageError(str("--steps: expected a positive count, got ", options.steps));
  if (options.batch_size <= 0 || options.accumulate <= 0)
    throw UsageError("--batch-size and --accumulate must be positive");
  if (options.keep_checkpoints < 1) throw UsageError("--keep-checkpoints: expected at least 1");
  check_objective_fits(options.model, options.objective);
  torch::Device device = ops::select_device(options.device);
  dist::Communicator single;
  dist::Communicator& communicator = options.communicator != nullptr ? *options.communicator : single;
  const int world = communicator.world_size();
  const bool main_rank = communicator.is_main();
  // Vocabulary and tokenizer come from the corpus header when build-corpus recorded them; a bad corpus is refused
  // before the model directory is made.
  const CorpusTokenizer corpus = corpus_tokenizer(options.corpus);
  if (main_rank) prepare_model_directory(options);

  pb::ModelConfig config = options.model;
  std::unique_ptr<io::Checkpoint> resumed = find_resume(options, corpus, communicator, &config);
  const int64_t step = resumed ? static_cast<int64_t>(resumed->info.step()) : 0;
  if (!resumed && corpus.vocab_size > 0 && corpus.vocab_size != config.vocab_size()) {
    log_info("pretrain: vocab_size ", config.vocab_size(), " -> ", corpus.vocab_size, " (from the corpus tokenizer)");
    config.set_vocab_size(static_cast<int32_t>(corpus.vocab_size));
  }
  const int64_t first_regular_id = options.first_regular_id;
  if (config.vocab_size() <= first_regular_id) {
    throw UsageError(str("model vocab_size ", config.vocab_size(), " leaves no regular tokens above the ",
                         first_regular_id, " special ids"));
  }
  // The resolved architecture beside the checkpoints, readable and reusable with --preset FILE.
  if (main_rank) {
    write_file_atomically((fs::path(options.model_dir) / "config.textproto").string(), config::config_to_text(config));
  }
  torch::manual_seed(options.seed);
  std::mt19937_64 rng(options.seed);
  Objectives objectives(config, options.objective, device);
  objectives.set_first_regular_id(first_regular_id);
  if (options.objective == Objective::kSpanCorruption) {
    if (first_regular_id - 5 < 2) {
      throw UsageError(str("span corruption needs the tokenizer's sentinels <extra_id_k>; the corpus tokenizer has ",
                           first_regular_id - 5, " (train one with `cabert tokenize --sentinels N`)"));
    }
    objectives.set_span_corruption(options.noise_density, options.mean_noise_span_length);
  }
  torch::nn::Module& module = objectives.module();
  AdamWOptions adam;
  adam.lr = options.lr > 0 ? options.lr : default_lr(config, options.objective);
  adam.eps = options.adam_eps;
  adam.weight_decay = options.weight_decay;
  const int64_t warmup =
      options.warmup_steps >= 0 ? options.warmup_steps : std::min<int64_t>(10000, options.steps / 10);
  AdamW optimizer(module, adam);

  data::DataShare share;
  share.rank = static_cast<uint32_t>(communicator.rank());
  share.world_size = static_cast<uint32_t>(world);
  share.seed = options.seed;
  data::ExampleStream stream(options.corpus, static_cast<uint64_t>(std::max<int64_t>(0, options.eval_examples)), share);
  // Encoders read an example as one sequence; span corruption shortens it for the encoder-decoder.
  stream.check_examples(config.vocab_size(), config.has_seq2seq() ? 0 : config.max_length());
  std::vector<pb::PretrainingExample> held_out = stream.held_out_examples();
  if (resumed) {
    io::restore_module(module, *resumed, "model/", "");
    optimizer.load_state(io::tensors_with_prefix(*resumed, "optimizer/"), resumed->path);
    restore_rank_state(*resumed, communicator, rng, stream);
  } else if (world > 1) {
    // Every rank starts from rank 0's weights; dropout and ELECTRA's sampling then differ by rank.
    std::vector<torch::Tensor> state = module.parameters(true);
    for (auto& buffer : module.buffers(true)) state.push_back(buffer);
    communicator.broadcast(state, "the initial parameters");
    torch::manual_seed(mix_seed(options.seed, static_cast<uint64_t>(communicator.rank())));
  }

  PretrainResult result;
  result.final_step = step;
  if (step >= options.steps) {
    log_info("pretrain: already at step ", step, " of ", options.steps, "; nothing to do");
    return result;
  }
  log_info("pretrain: ", config.name(), " (", models::human_parameters(models::count_parameters(module)),
           " parameters), objective ", objective_name(options.objective), ", steps ", options.steps, ", batch ",
           options.batch_size, " x ", options.accumulate, world > 1 ? str(" x ", world, " processes") : "",
           ", peak lr ", adam.lr, ", warm-up ", warmup, " on ", options.device);
  std::unique_ptr<MetricsLog> metrics;  // rank 0's; a resumed run carries the records up to its checkpoint over
  if (main_rank) {
    metrics = std::make_unique<MetricsLog>((fs::path(options.model_dir) / "metrics.cabert").string(), config,
                                           resumed ? step : -1, options.tensorboard);
  }
  PretrainState state{options, communicator, config, corpus, objectives, optimizer, stream, rng, adam.lr, warmup};
  train_steps(state, step, held_out, metrics.get(), result);
  if (metrics) metrics->close();
  return result;
}

}  // namespace cabert::train
