#include "cmd/distributed_flags.h"

#include <torch/cuda.h>

#include "lib/core/errors.h"
#include "lib/core/run_context.h"
#include "lib/dist/environment.h"
#include "lib/dist/local_launcher.h"
#include "lib/ops/device.h"

namespace cabert::cmd {

void add_distributed_flags(CLI::App* command, DistributedFlags& flags) {
  command
      ->add_option("--nproc", flags.nproc,
                   "Data-parallel processes to start on this machine (Gloo on CPU, NCCL on CUDA); torchrun "
                   "--no-python cabert ... works too")
      ->capture_default_str();
  command
      ->add_option("--dist-timeout", flags.timeout_seconds,
                   "Seconds a rank waits for the others before it stops with an error")
      ->capture_default_str();
}

bool launch_if_requested(const DistributedFlags& flags) {
  if (flags.nproc < 1) throw UsageError(str("--nproc: expected at least 1, got ", flags.nproc));
  if (flags.timeout_seconds < 1)
    throw UsageError(str("--dist-timeout: expected at least 1 s, got ", flags.timeout_seconds));
  if (flags.nproc == 1 || dist::started_by_launcher()) return false;
  dist::launch_local_processes(flags.nproc, run_context().argv, std::chrono::seconds(flags.timeout_seconds + 30));
  return true;
}

std::unique_ptr<dist::Communicator> join_job(const DistributedFlags& flags, std::string* device) {
  const dist::Environment env = dist::read_environment();
  if (!env.distributed()) return std::make_unique<dist::Communicator>();
  const torch::Device parsed =
      ops::select_device(dist::rank_device(*device, env, static_cast<int64_t>(torch::cuda::device_count())));
  *device = parsed.str();
  return std::make_unique<dist::Communicator>(env, parsed, std::chrono::seconds(flags.timeout_seconds));
}

}  // namespace cabert::cmd
