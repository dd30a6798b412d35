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
#include "lib/train/update_guard.h"

namespace cabert::train {
namespace {

namespace fs = std::filesystem;

// The step's loss among its metric sums (no objective's sum has this name).
constexpr const char* kStepLoss = "step_loss";

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
  std::map<std::string, std::string> seen;                                  // canonical path -> as given
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
      throw UsageError(str("--corpus: ", shard, " is given twice (also as ", it->second,
                           "); each shard must be given once"));
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
        throw DataError(str(reader.name(), ": header metadata vocab_size '", vocab,
                            "': expected a positive 32-bit integer"));
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

}  // namespace

std::string describe_pretraining_model(const pb::ModelConfig& config, Objective objective) {
  if (config.has_seq2seq()) return models::module_tree(*models::Seq2SeqModel(config), "model");
  check_objective_fits(config, objective);
  if (objective == Objective::kMlm) return models::module_tree(*models::MlmModel(config), "model");
  return models::module_tree(*models::ElectraModel(config), "model");
}

PretrainResult run_pretraining(const PretrainOptions& options_in) {
  PretrainOptions options = options_in;
  if (options.steps <= 0) throw UsageError(str("--steps: expected a positive count, got ", options.steps));
  if (options.batch_size <= 0 || options.accumulate <= 0) throw UsageError("--batch-size and --accumulate must be positive");
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
  if (main_rank) {
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

  pb::ModelConfig config = options.model;
  const std::string& tokenizer = corpus.tokenizer;
  const std::string& tokenizer_checksum = corpus.checksum;
  int64_t step = 0;
  std::unique_ptr<io::Checkpoint> resumed;
  if (options.resume) {
    resumed = load_latest_checkpoint(options.model_dir, communicator);
    if (!resumed) {
      log_info("pretrain: --resume: no checkpoint in ", options.model_dir, ", starting from scratch");
    } else {
      config = resumed->info.model();
      step = static_cast<int64_t>(resumed->info.step());
      if (!resumed->info.tokenizer_checksum().empty() && !tokenizer_checksum.empty() &&
          resumed->info.tokenizer_checksum() != tokenizer_checksum) {
        throw UsageError(str("--resume: the corpus was tokenized with another tokenizer than the checkpoint ",
                             resumed->path));
      }
      check_resume_options(resumed->path, options.allow_changed_options, step >= options.steps);
      log_info("pretrain: resuming from ", resumed->path, " at step ", step);
    }
  }
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
  const double peak_lr = adam.lr;
  const int64_t warmup = options.warmup_steps >= 0 ? options.warmup_steps : std::min<int64_t>(10000, options.steps / 10);
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

  // Collective: every rank hands rank 0 its state; rank 0 alone writes.
  auto save = [&](int64_t at_step) {
    // Every rank holds the same weights, so every rank refuses alike.
    check_finite_weights(io::module_tensors(module, "model/"), "pretrain", str("at step ", at_step));
    std::vector<pb::RankState> states = gather_rank_states(communicator, capture_rank_state(stream, rng), at_step);
    std::string path = io::checkpoint_path(options.model_dir, at_step);
    if (main_rank) {
      pb::CheckpointInfo info;
      info.set_kind("pretrain");
      *info.mutable_model() = config;
      info.set_tokenizer(tokenizer);
      info.set_tokenizer_checksum(tokenizer_checksum);
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
      meta["peak_lr"] = str(peak_lr);
      meta["warmup_steps"] = std::to_string(warmup);
      meta["seed"] = std::to_string(options.seed);
      NamedTensors tensors = io::module_tensors(module, "model/");
      for (auto& [name, tensor] : optimizer.state()) tensors.emplace_back("optimizer/" + name, tensor);
      io::save_checkpoint(path, info, tensors);
      auto all = io::list_checkpoints(options.model_dir);
      for (size_t i = 0; i + options.keep_checkpoints < all.size(); ++i) fs::remove(all[i].second);
    }
    communicator.barrier(str("saving checkpoint ", at_step));  // no rank leaves before the file is there
    return path;
  };

  PretrainResult result;
  result.final_step = step;
  if (step >= options.steps) {
    log_info("pretrain: already at step ", step, " of ", options.steps, "; nothing to do");
    return result;
  }
  log_info("pretrain: ", config.name(), " (", models::human_parameters(models::count_parameters(module)),
           " parameters), objective ", objective_name(options.objective), ", steps ", options.steps, ", batch ",
           options.batch_size, " x ", options.accumulate, world > 1 ? str(" x ", world, " processes") : "",
           ", peak lr ", peak_lr, ", warm-up ", warmup, " on ", options.device);
  std::unique_ptr<MetricsLog> metrics;  // rank 0's; a resumed run carries the records up to its checkpoint over
  if (main_rank) {
    metrics = std::make_unique<MetricsLog>((fs::path(options.model_dir) / "metrics.cabert").string(), config,
                                           resumed ? step : -1);
  }
  std::vector<torch::Tensor> parameters = module.parameters(true);
  std::unique_ptr<dist::GradientSync> gradient_sync = communicator.gradient_sync(parameters);
  module.train();
  // Counted from this process's first step so that the rate and ETA stay right after --resume.
  const int64_t first_step = step;
  Progress progress(str("pretrain (from step ", first_step, ")"), "steps", static_cast<uint64_t>(options.steps - first_step));
  const auto start = std::chrono::steady_clock::now();
  // The run's clock: a resumed run goes on from the time its earlier part had logged.
  const double wall_before = metrics ? metrics->carried_wall_seconds() : 0.0;
  auto wall = [&] {
    return wall_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double tokens_total = 0, seconds_total = 0;
  UpdateGuard update_guard("pretrain", "step", options.max_skipped_updates);
  while (step < options.steps) {
    const auto step_start = std::chrono::steady_clock::now();
    const double lr = linear_warmup_decay(peak_lr, step + 1, warmup, options.steps);
    optimizer.set_lr(lr);
    optimizer.zero_grad();
    // The metric sums, and under kStepLoss this rank's part of the joint loss (the parts add up over the ranks):
    // on the device until the step's one read.
    MetricSums step_sums;
    int64_t tokens = 0;
    for (int64_t micro = 0; micro < options.accumulate; ++micro) {
      std::vector<pb::PretrainingExample> examples;
      std::vector<uint64_t> seeds(options.batch_size);
      for (int64_t i = 0; i < options.batch_size; ++i) examples.push_back(stream.next(&seeds[i]));
      data::Batch batch = data::make_batch(examples);
      batch.row_seeds = std::move(seeds);
      tokens += batch.tokens;
      StepOutput out;
      {
        ops::AutocastScope autocast(options.amp, device);  // bfloat16 on CPU or CUDA (lib/ops/mixed_precision.h)
        out = objectives.compute(batch, rng);
      }
      std::vector<double> counts;
      for (const auto& term : out.terms) counts.push_back(term.count);
      communicator.all_reduce_sum(counts, "the masked-token counts");
      torch::Tensor loss = joint_batch_loss(out, counts, world) / static_cast<double>(options.accumulate);
      step_sums.add(kStepLoss, loss.detach().to(torch::kDouble) / world);
      if (micro + 1 == options.accumulate) gradient_sync->prepare(loss);  // earlier micro-batches accumulate locally
      try {
        loss.backward();
      } catch (const std::exception& error) {
        if (!communicator.distributed()) throw;
        communicator.fail("the gradient all-reduce", error);
      }
      step_sums.add(out.sums);
    }
    std::map<std::string, double> sums = step_sums.read();
    double loss_value = sums[kStepLoss];
    sums.erase(kStepLoss);
    const bool finite = std::isfinite(loss_value);  // a non-finite micro-batch loss makes the sum non-finite
    // One all-reduce for what every rank must agree on before the update: a non-finite loss on any rank, the
    // joint loss, the token count and the metric sums.
    for (const auto& name : metric_sum_names(options.objective)) sums.try_emplace(name, 0.0);
    std::vector<double> shared{finite ? 0.0 : 1.0, loss_value, static_cast<double>(tokens)};
    for (const auto& [k, v] : sums) shared.push_back(v);
    communicator.all_reduce_sum(shared, "the step's loss and metrics");
    if (shared[0] > 0) {
      auto existing = main_rank ? io::list_checkpoints(options.model_dir) : decltype(io::list_checkpoints("")){};
      throw Error(str("pretrain: non-finite loss (", shared[1], ") at step ", step + 1,
                      world > 1 ? str(" on ", static_cast<int>(shared[0]), " of ", world, " ranks") : "", "; stopping. ",
                      !main_rank ? std::string("")
                      : existing.empty() ? std::string("No checkpoint was written yet.")
                                         : str("The last good checkpoint is ", existing.back().second)));
    }
    loss_value = shared[1];
    tokens = static_cast<int64_t>(shared[2]);
    {
      size_t i = 3;
      for (auto& [k, v] : sums) v = shared[i++];
    }
    if (options.before_update) options.before_update(step + 1, parameters);
    const double grad_norm = clip_gradients(parameters, options.clip_norm);
    if (update_guard.allow(grad_norm, step + 1)) optimizer.step();
    ++step;
    ++result.steps_done;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    tokens_total += tokens, seconds_total += seconds;
    const double tokens_per_second = tokens / std::max(seconds, 1e-9);
    result.last_loss = loss_value;
    auto values = summarise(sums, options.objective);
    values["loss"] = loss_value;
    values["lr"] = lr;
    values["grad_norm"] = grad_norm;
    if (update_guard.skipped() > 0) values["skipped_updates"] = static_cast<double>(update_guard.skipped());
    values["tokens_per_second"] = tokens_per_second;
    values["tokens"] = static_cast<double>(tokens);
    if (main_rank) metrics->add("train", step, wall(), values);
    if (!options.quiet_progress) {
      char extra[160];
      std::snprintf(extra, sizeof(extra), "loss %.4f, lr %.3g, %s tok/s", loss_value, lr,
                    human_count(tokens_per_second).c_str());
      progress.update(static_cast<uint64_t>(step - first_step), extra);
    }
    if (options.after_step) options.after_step(step);
    const bool last = step == options.steps;
    if ((options.eval_every > 0 && step % options.eval_every == 0) || last) {
      auto eval = evaluate(objectives, held_out, stream, options.batch_size, options.objective, options.seed,
                           communicator);
      if (!eval.empty()) {
        if (main_rank) metrics->add("eval", step, wall(), eval);
        result.last_eval = eval;
        log_info("pretrain: step ", step, " eval (", held_out.size(), " held-out examples): ", format_values(eval));
      }
    }
    // A signal on any rank stops every rank at this step, after one checkpoint.
    const int signal_here = interrupt_requested();
    std::vector<double> stop{signal_here != 0 ? 1.0 : 0.0};
    communicator.all_reduce_sum(stop, "the stop flag");
    const int signal = stop[0] > 0 ? (signal_here != 0 ? signal_here : SIGTERM) : 0;
    if (last || signal != 0 || (options.save_every > 0 && step % options.save_every == 0)) {
      result.last_checkpoint = save(step);
      log_debug("pretrain: saved ", result.last_checkpoint);
    }
    if (signal != 0 && !last) {
      log_info("pretrain: stopped at step ", step, " by signal ", signal, "; resume with --resume from ",
               result.last_checkpoint);
      throw Interrupted(signal);
    }
  }
  progress.finish(str("loss ", result.last_loss));
  if (metrics) metrics->close();
  result.final_step = step;
  result.tokens_per_second = tokens_total / std::max(seconds_total, 1e-9);
  return result;
}

}  // namespace cabert::train
