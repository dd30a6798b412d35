// cabert finetune: Fine-tune on GLUE, SQuAD or a generic classification set.
// Until its issue (#4) lands, the subcommand is listed in `cabert --help` and, when run, says so and
// exits 2 (usage error).
#include "cmd/commands.h"

namespace cabert::cmd {

void add_finetune(CLI::App& app) {
  add_later_subcommand(app, "finetune", "Fine-tune on GLUE, SQuAD or a generic classification set", "#4");
}

}  // namespace cabert::cmd
