// cabert export: models out to (and in from) Hugging Face formats, and the pictures of the papers.
//   cabert export --model CKPT -o DIR              safetensors + config.json + tokenizer (lib/interop/export_model.h)
//   cabert export --from-hf DIR -o CKPT            a HF BERT / ELECTRA / ConvBERT directory -> cabert checkpoint
//   cabert export --model CKPT --pictures DIR      kernels, attention maps, SDConv kernels (--sentence)
//   cabert export --metrics FILE... --pictures DIR training and dev curves, runs overlaid
//   cabert export --metrics FILE... --tensorboard DIR   the same records as TensorBoard event files
#include <filesystem>
#include <map>

#include "cmd/commands.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/interop/export_model.h"
#include "lib/interop/import_model.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/io/tensorboard_metrics.h"
#include "lib/pictures/curve_pictures.h"
#include "lib/pictures/kernel_pictures.h"
#include "lib/pictures/sentence_pictures.h"
#include "lib/text/tokenizer.h"

namespace fs = std::filesystem;

namespace cabert::cmd {

namespace {

struct ExportFlags {
  std::string model, from_hf, output, tokenizer;
  std::string pictures, sentence, tensorboard;
  std::vector<std::string> metrics, labels;
  int64_t max_tokens = 48;
  int64_t max_offset = 8;
};

// The model's name in picture titles: its config name and the checkpoint's step.
std::string picture_model_name(const io::Checkpoint& checkpoint) {
  return str(checkpoint.info.model().name(), " (", checkpoint.info.kind(), " step ", checkpoint.info.step(), ")");
}

void draw_pictures(const ExportFlags& flags) {
  std::vector<pictures::NamedFigure> figures;
  if (!flags.model.empty()) {
    io::Checkpoint checkpoint = io::load_checkpoint(flags.model);
    const std::string name = picture_model_name(checkpoint);
    std::map<std::string, torch::Tensor> tensors = interop::model_tensors(checkpoint);
    for (auto& figure : pictures::kernel_figures(checkpoint.info.model(), tensors, name)) figures.push_back(figure);
    if (!flags.sentence.empty()) {
      // As for the export: ids of another tokenizer would draw the maps of other tokens (or index past the
      // embedding table).
      const text::Tokenizer tokenizer = eval::open_checkpoint_tokenizer(checkpoint.info, flags.model, flags.tokenizer);
      if (flags.max_tokens > checkpoint.info.model().max_length()) {
        log_info("export: --max-tokens ", flags.max_tokens, " is more than the model's max_length ",
                 checkpoint.info.model().max_length(), "; the sentence is drawn up to ",
                 checkpoint.info.model().max_length(), " tokens");
      }
      for (auto& figure : pictures::sentence_figures(checkpoint, tokenizer, flags.sentence, name, flags.max_tokens,
                                                     flags.max_offset)) {
        figures.push_back(figure);
      }
    }
  }
  if (!flags.metrics.empty()) {
    if (!flags.labels.empty() && flags.labels.size() != flags.metrics.size()) {
      throw UsageError(str("--labels: expected one label per --metrics file (", flags.metrics.size(), "), got ",
                           flags.labels.size()));
    }
    std::vector<pictures::MetricsRun> runs;
    for (size_t i = 0; i < flags.metrics.size(); ++i) {
      runs.push_back({flags.metrics[i], flags.labels.empty() ? "" : flags.labels[i]});
    }
    for (auto& figure : pictures::curve_figures(runs)) figures.push_back(figure);
  }
  if (figures.empty()) {
    throw UsageError(str("--pictures: nothing to draw", flags.model.empty() ? "" : str(" for ", flags.model),
                         " (kernels exist for Chang et al.'s fixed/composite/depthwise variants and Wu et al.'s "
                         "lightweight convolutions; give --sentence TEXT for attention maps and dynamic kernels, "
                         "--metrics FILE... for curves)"));
  }
  for (const auto& path : pictures::write_figures(figures, flags.pictures)) log_info("export: drew ", path);
}

void write_tensorboard(const ExportFlags& flags) {
  if (flags.metrics.empty()) throw UsageError("--tensorboard needs --metrics FILE... (metrics.cabert of runs)");
  if (!flags.labels.empty() && flags.labels.size() != flags.metrics.size()) {
    throw UsageError(
        str("--labels: expected one label per --metrics file (", flags.metrics.size(), "), got ", flags.labels.size()));
  }
  std::vector<io::TensorboardRun> runs;
  for (size_t i = 0; i < flags.metrics.size(); ++i) {
    runs.push_back({flags.metrics[i], flags.labels.empty() ? "" : flags.labels[i]});
  }
  for (const auto& path : io::export_tensorboard(runs, flags.tensorboard)) log_info("export: wrote ", path);
}

void run_export(const ExportFlags& flags) {
  if (!flags.tensorboard.empty()) {
    write_tensorboard(flags);
    if (flags.pictures.empty() && flags.output.empty()) return;
  }
  if (!flags.pictures.empty()) {
    if (flags.model.empty() && flags.metrics.empty()) {
      throw UsageError("--pictures needs --model CKPT (kernels, --sentence maps) or --metrics FILE... (curves)");
    }
    if (!flags.from_hf.empty()) throw UsageError("--pictures draws a cabert checkpoint: import it first");
    draw_pictures(flags);
    if (flags.output.empty()) return;
  } else if (!flags.sentence.empty() || (!flags.metrics.empty() && flags.tensorboard.empty())) {
    throw UsageError("--sentence and --metrics need --pictures DIR (--metrics: or --tensorboard DIR)");
  }
  if (!flags.from_hf.empty()) {
    if (!flags.model.empty()) throw UsageError("give either --model CKPT (export) or --from-hf DIR (import), not both");
    if (flags.output.empty()) throw UsageError("--from-hf needs -o CKPT (the checkpoint to write)");
    interop::ImportOptions options{flags.from_hf, flags.output, flags.tokenizer};
    interop::ImportSummary summary = interop::import_model(options);
    log_info("export: imported ", summary.tensors, " tensors of a ", interop::hf_model_type(summary.family), " ",
             interop::model_head_name(summary.head), " model from ", flags.from_hf, " into ", flags.output,
             " (tokenizer ", summary.tokenizer, ")");
    if (!summary.ignored.empty()) {
      std::string list;
      for (size_t i = 0; i < summary.ignored.size() && i < 6; ++i) list += (i ? ", " : "") + summary.ignored[i];
      log_warning("export: left behind ", summary.ignored.size(), " tensors cabert's model does not take (", list,
                  summary.ignored.size() > 6 ? ", ..." : "", "); a task head is trained afresh by finetune --init");
    }
    return;
  }
  if (flags.model.empty()) throw UsageError("give --model CKPT (export) or --from-hf DIR (import)");
  if (flags.output.empty()) throw UsageError("--model needs -o DIR (the export directory)");
  interop::ExportOptions options{flags.model, flags.output, flags.tokenizer};
  interop::ExportSummary summary = interop::export_checkpoint(options);
  if (summary.family != interop::HfFamily::kNone) {
    log_info("export: ", summary.tensors, " tensors to ", flags.output, " (Hugging Face ", summary.architecture, ")");
  } else {
    log_info("export: ", summary.tensors, " tensors to ", flags.output, " under cabert's names (", summary.why_not,
             ")");
  }
  if (summary.generator) log_info("export: the ELECTRA generator to ", (fs::path(flags.output) / "generator").string());
}

}  // namespace

void add_export(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* command = app.add_subcommand(
      "export", "Export a checkpoint to safetensors + config.json (Hugging Face classes where they exist), import "
                "Hugging Face BERT / ELECTRA / ConvBERT models, draw the papers' pictures (PNG)");
  CLI::Option* model =
      command->add_option("--model", flags->model,
                          "Checkpoint to export, or a model directory (its best.cabert, else its newest checkpoint)");
  command->add_option("--from-hf", flags->from_hf,
                      "Import: a Hugging Face directory (config.json, model.safetensors, SentencePiece tokenizer)");
  command->add_option("-o,--output", flags->output, "Export: the directory to write; import: the checkpoint to write");
  command->add_option("--tokenizer", flags->tokenizer,
                      "SentencePiece model, when the checkpoint's is not there (export) or the directory has none "
                      "(import)");
  command->add_option("--pictures", flags->pictures,
                      "Draw PNG pictures into this directory: learned kernels of --model, attention maps and dynamic "
                      "kernels for --sentence, curves of --metrics files");
  CLI::Option* sentence = command->add_option("--sentence", flags->sentence,
                                              "Pictures: the sentence for attention maps and dynamic kernels");
  CLI::Option* metrics =
      command
          ->add_option("--metrics", flags->metrics,
                       "Pictures and --tensorboard: metrics.cabert files of pretrain / finetune runs")
          ->expected(1, -1);
  // Options of one kind of picture are refused without it (they were ignored silently): "--labels requires
  // --metrics", "--max-tokens requires --sentence", "--sentence requires --model".
  command->add_option("--tensorboard", flags->tensorboard,
                      "Write the --metrics files' records as TensorBoard event files under DIR/<label> (label: "
                      "--labels, else the file's directory name)");
  command
      ->add_option("--labels", flags->labels,
                   "Pictures: a legend label per --metrics file; --tensorboard: the run's name")
      ->expected(1, -1)
      ->needs(metrics);
  command->add_option("--max-tokens", flags->max_tokens, "Pictures: tokens of --sentence kept, [CLS]/[SEP] included")
      ->capture_default_str()
      ->check(CLI::Range(3, 4096))
      ->needs(sentence);
  command->add_option("--max-offset", flags->max_offset, "Pictures: offsets -D..D of the attention-by-offset plot")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096))
      ->needs(sentence);
  sentence->needs(model);
  command->callback([command, flags] {
    record_options(*command);
    flags->model = io::resolve_checkpoint_argument(flags->model, "--model");
    run_export(*flags);
  });
}

}  // namespace cabert::cmd
