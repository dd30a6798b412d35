// cabert pretrain: Pre-train an encoder (MLM or ELECTRA replaced-token detection).
// Until its issue (#3) lands, the subcommand is listed in `cabert --help` and, when run, says so and
// exits 2 (usage error).
#include "cmd/commands.h"

namespace cabert::cmd {

void add_pretrain(CLI::App& app) {
  add_later_subcommand(app, "pretrain", "Pre-train an encoder (MLM or ELECTRA replaced-token detection)", "#3");
}

}  // namespace cabert::cmd
