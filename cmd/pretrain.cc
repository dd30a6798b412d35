// cabert pretrain: pre-train an encoder with MLM or ELECTRA replaced-token detection, or an encoder-decoder with
// T5 span corruption (lib/train/pretrainer.h).
#include <filesystem>
#include <limits>
#include <iostream>

#include "cmd/commands.h"
#include "cmd/compute_flags.h"
#include "cmd/distributed_flags.h"
#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/core/errors.h"
#include "lib/core/numbers.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/io/record_file.h"
#include "lib/text/tokenizer.h"
#include "lib/train/pretrainer.h"

namespace cabert::cmd {
namespace {

struct PretrainFlags {
  std::string preset = "bert-small-composite";
  std::vector<std::string> sets;
  std::string objective = "mlm";
  ComputeFlags compute;
  DistributedFlags distributed;
  bool dry_run = false, list_presets = false, dump_config = false;
  train::PretrainOptions options;
};

// 5 + the number of sentinel tokens of the corpus tokenizer: as the corpus recorded it, else (a corpus of an
// earlier cabert) from the tokenizer it names, when that exists here.
int64_t first_regular_id_of(const std::string& shard) {
  io::RecordReader reader(shard);
  const auto& metadata = reader.header().metadata();
  if (auto sentinels = metadata.find("sentinels"); sentinels != metadata.end()) {
    return text::SpecialTokens::kFirstSentinel + parse_integer(sentinels->second, 0,
                                                               std::numeric_limits<int32_t>::max(),
                                                               str(reader.name(), ": header metadata sentinels"));
  }
  auto found = metadata.find("tokenizer");
  if (found == metadata.end() || !std::filesystem::exists(found->second)) {
    log_warning("pretrain: the corpus does not name a tokenizer that exists here; treating ids 0-4 as special");
    return text::SpecialTokens::kFirstSentinel;
  }
  text::Tokenizer tokenizer(found->second);
  return text::SpecialTokens::kFirstSentinel + tokenizer.num_sentinels();
}

void run(PretrainFlags& flags) {
  if (flags.list_presets) {
    std::cout << config::describe_presets();
    return;
  }
  auto objective = train::parse_objective(flags.objective);
  pb::ModelConfig config = config::load_model_config(flags.preset, flags.sets);
  if (flags.dump_config) {
    std::cout << config::config_to_text(config);
    return;
  }
  if (flags.dry_run) {
    // The vocabulary of the corpus tokenizer when a corpus is given, as a real run would use.
    if (!flags.options.corpus.empty()) {
      io::RecordReader reader(expand_inputs(flags.options.corpus).front());
      auto vocab = reader.header().metadata().find("vocab_size");
      if (vocab != reader.header().metadata().end()) {
        config.set_vocab_size(static_cast<int32_t>(parse_integer(vocab->second, 1, std::numeric_limits<int32_t>::max(),
                                                                 str(reader.name(), ": header metadata vocab_size"))));
      }
    }
    std::cout << train::describe_pretraining_model(config, objective);
    return;
  }
  auto& options = flags.options;
  if (options.corpus.empty()) throw UsageError("pretrain: --corpus is required (shards from `cabert build-corpus`)");
  if (options.model_dir.empty()) throw UsageError("pretrain: --model-dir is required");
  options.device = apply_compute_flags(flags.compute);
  if (launch_if_requested(flags.distributed)) return;
  std::unique_ptr<dist::Communicator> communicator = join_job(flags.distributed, &options.device);
  options.communicator = communicator.get();
  options.corpus = expand_inputs(options.corpus);
  options.model = config;
  options.objective = objective;
  options.seed = global_options().seed;
  options.first_regular_id = first_regular_id_of(options.corpus.front());
  train::PretrainResult result = train::run_pretraining(options);
  log_info("pretrain: ", result.steps_done, " steps (now at step ", result.final_step, "), last loss ",
           result.last_loss, ", ", static_cast<int64_t>(result.tokens_per_second), " tokens/s; checkpoint ",
           result.last_checkpoint);
}

}  // namespace

void add_pretrain(CLI::App& app) {
  auto flags = std::make_shared<PretrainFlags>();
  auto& o = flags->options;
  CLI::App* sub = app.add_subcommand(
      "pretrain",
      "Pre-train an encoder (MLM or ELECTRA replaced-token detection) or an encoder-decoder (span corruption)");
  sub->add_option("--preset", flags->preset, "Model preset (--list-presets) or a .textproto ModelConfig")
      ->capture_default_str();
  sub->add_option("--set", flags->sets, "Override a config field: a.b=value (repeatable)");
  sub->add_option("--corpus", o.corpus, "Pre-training shards from `cabert build-corpus` (files or directories)");
  sub->add_option("--model-dir", o.model_dir, "Directory for checkpoints and metrics.cabert");
  sub->add_option("--tensorboard", o.tensorboard,
                  "Also write the metrics records as TensorBoard event files into this directory (rank 0; a resumed "
                  "run continues the curves)");
  sub->add_option("--objective", flags->objective,
                  "mlm or electra (encoders), span-corruption (encoder-decoders: tay-*, wu-*, transformer-*)")
      ->capture_default_str();
  sub->add_option("--noise-density", o.noise_density, "Span corruption: fraction of tokens noised")
      ->capture_default_str();
  sub->add_option("--mean-noise-span-length", o.mean_noise_span_length, "Span corruption: mean noise span length")
      ->capture_default_str();
  sub->add_option("--steps", o.steps, "Optimizer updates in total")->capture_default_str();
  sub->add_option("--batch-size", o.batch_size,
                  "Examples per micro-batch and process (an update sees batch x accumulate x processes)")
      ->capture_default_str();
  sub->add_option("--accumulate", o.accumulate, "Micro-batches per update")->capture_default_str();
  sub->add_option("--lr", o.lr, "Peak learning rate (0: 3e-4 small, 1e-4 base MLM, 2e-4 base ELECTRA)")
      ->capture_default_str();
  sub->add_option("--warmup-steps", o.warmup_steps, "Linear warm-up updates (-1: min(10000, steps/10))")
      ->capture_default_str();
  sub->add_option("--weight-decay", o.weight_decay, "AdamW weight decay (not on biases/LayerNorm)")
      ->capture_default_str();
  sub->add_option("--clip-norm", o.clip_norm, "Gradient clipping: max global L2 norm (0 = off)")->capture_default_str();
  sub->add_option("--max-skipped-updates", o.max_skipped_updates,
                  "A non-finite gradient norm skips the update; this many in a row stop the run")
      ->capture_default_str();
  sub->add_option("--eval-every", o.eval_every, "Evaluate the held-out slice every N steps (0: at the end)")
      ->capture_default_str();
  sub->add_option("--eval-examples", o.eval_examples, "Held-out examples (first records of the first shard)")
      ->capture_default_str();
  sub->add_option("--save-every", o.save_every, "Checkpoint every N steps (0: at the end only)")->capture_default_str();
  sub->add_option("--keep-checkpoints", o.keep_checkpoints, "Checkpoints to keep")->capture_default_str();
  sub->add_flag("--resume", o.resume, "Continue from the latest checkpoint in --model-dir");
  sub->add_flag("--allow-changed-options", o.allow_changed_options,
                "With --resume: continue although options differ from the checkpoint's (refused otherwise)");
  add_compute_flags(sub, flags->compute);
  add_distributed_flags(sub, flags->distributed);
  sub->add_flag("--amp", o.amp,
                "Mixed precision: bfloat16 autocast (CPU or CUDA); conv and relative-position ops run in float32");
  sub->add_flag("--dry-run", flags->dry_run, "Print the module tree with parameter counts and exit");
  sub->add_flag("--list-presets", flags->list_presets, "List the model presets and exit");
  sub->add_flag("--dump-config", flags->dump_config, "Print the resolved model config (text format) and exit");
  sub->callback([sub, flags] {
    record_options(*sub);
    run(*flags);
  });
}

}  // namespace cabert::cmd
