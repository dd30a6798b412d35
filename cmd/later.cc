// Subcommands that later issues build: listed in `cabert --help`; when run they say plainly that they are not
// in this build yet and exit 2 (usage error).
#include "cmd/commands.h"
#include "lib/core/errors.h"

namespace cabert::cmd {

void add_later_subcommand(CLI::App& app, const char* name, const char* description, const char* issue) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  sub->callback([name, issue] {
    throw UsageError(str("`cabert ", name, "` is not available in this build yet (planned in issue ", issue,
                         "); see README.md for what works today"));
  });
}

}  // namespace cabert::cmd
