// cabert bench: Benchmark convolution ops and models (time, tokens/s, memory, FLOPs).
// Until its issue (#5) lands, the subcommand is listed in `cabert --help` and, when run, says so and
// exits 2 (usage error).
#include "cmd/commands.h"

namespace cabert::cmd {

void add_bench(CLI::App& app) {
  add_later_subcommand(app, "bench", "Benchmark convolution ops and models (time, tokens/s, memory, FLOPs)", "#5");
}

}  // namespace cabert::cmd
