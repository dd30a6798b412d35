// The flags every subcommand that runs a model shares, declared once: --device (cpu, cuda, cuda:N) and
// --kernels (fused or reference). --threads, --seed and the log flags are global (cmd/main.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace cabert::cmd {

struct ComputeFlags {
  std::string device = "cpu";
  std::string kernels = "fused";
};

// Adds --device and --kernels to `command`, bound to `flags`.
void add_compute_flags(CLI::App* command, ComputeFlags& flags);

// Checks both flags (UsageError naming the accepted values) and sets the process-wide kernel path.
// Returns the device, validated (a CUDA device needs a CUDA build and a device that exists).
std::string apply_compute_flags(const ComputeFlags& flags);

}  // namespace cabert::cmd
