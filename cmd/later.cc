// Subcommands that later issues build. Each is listed in `cabert --help` and, when run, says plainly that
// it is not part of this build yet and exits 2 (usage error).
#include "cmd/commands.h"
#include "lib/core/errors.h"

namespace cabert::cmd {
namespace {

void add_later(CLI::App& app, const char* name, const char* description, const char* issue) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  sub->callback([name, issue] {
    throw UsageError(str("`cabert ", name, "` is not available in this build yet (planned in issue ", issue,
                         "); see README.md for what works today"));
  });
}

}  // namespace

void add_pretrain(CLI::App& app) {
  add_later(app, "pretrain", "Pre-train an encoder (MLM or ELECTRA replaced-token detection)", "#3");
}
void add_finetune(CLI::App& app) {
  add_later(app, "finetune", "Fine-tune on GLUE, SQuAD or a generic classification set", "#4");
}
void add_evaluate(CLI::App& app) {
  add_later(app, "evaluate", "Compute official metrics and write predictions / GLUE submissions", "#4");
}
void add_export(CLI::App& app) {
  add_later(app, "export", "Export a checkpoint to safetensors + config.json, draw kernels", "a later issue");
}
void add_bench(CLI::App& app) {
  add_later(app, "bench", "Benchmark convolution ops and models (time, tokens/s, memory, FLOPs)", "#5");
}

}  // namespace cabert::cmd
