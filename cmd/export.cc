// cabert export: Export a checkpoint to safetensors + config.json, draw kernels.
// Until its issue (a later issue) lands, the subcommand is listed in `cabert --help` and, when run, says so and
// exits 2 (usage error).
#include "cmd/commands.h"

namespace cabert::cmd {

void add_export(CLI::App& app) {
  add_later_subcommand(app, "export", "Export a checkpoint to safetensors + config.json, draw kernels", "a later issue");
}

}  // namespace cabert::cmd
