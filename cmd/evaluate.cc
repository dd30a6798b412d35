// cabert evaluate: Compute official metrics and write predictions / GLUE submissions.
// Until its issue (#4) lands, the subcommand is listed in `cabert --help` and, when run, says so and
// exits 2 (usage error).
#include "cmd/commands.h"

namespace cabert::cmd {

void add_evaluate(CLI::App& app) {
  add_later_subcommand(app, "evaluate", "Compute official metrics and write predictions / GLUE submissions", "#4");
}

}  // namespace cabert::cmd
