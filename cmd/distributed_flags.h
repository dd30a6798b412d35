// The flags of the subcommands that train data-parallel (pretrain, finetune), declared once: --nproc N
// (spawn N local ranks, lib/dist/local_launcher.h) and --dist-timeout. A process that torchrun or --nproc
// started finds its rank in the environment (lib/dist/environment.h).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "lib/dist/communicator.h"

namespace cabert::cmd {

struct DistributedFlags {
  int nproc = 1;
  int timeout_seconds = 300;
};

void add_distributed_flags(CLI::App* command, DistributedFlags& flags);

// With --nproc N > 1 in a process no launcher started: runs N ranks of this same command line, waits for
// them and returns true (the caller is done). Otherwise returns false at once.
bool launch_if_requested(const DistributedFlags& flags);

// This process's place in the job: a world of one, or the job its environment names. `device` "cuda"
// becomes "cuda:LOCAL_RANK" in a job (one GPU per rank).
std::unique_ptr<dist::Communicator> join_job(const DistributedFlags& flags, std::string* device);

}  // namespace cabert::cmd
