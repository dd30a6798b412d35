// Where this process stands in a data-parallel job, read from the variables PyTorch's launchers set
// (torchrun, and `cabert ... --nproc N`): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT. Without them (or with WORLD_SIZE=1) the process runs alone.
#pragma once

#include <cstdint>
#include <string>

namespace cabert::dist {

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // picks the GPU (cuda:LOCAL_RANK)
  int local_world_size = 1;  // processes on this machine (they share its cores)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool distributed() const { return world_size > 1; }
};

// UsageError naming the variable and what it holds when one is malformed or missing while RANK or
// WORLD_SIZE is set (e.g. "RANK=2 is not below WORLD_SIZE=2").
Environment read_environment();

// True when a launcher started this process (RANK is set): `--nproc` then does not spawn again.
bool started_by_launcher();

// This process's --device in a distributed job. "cuda" becomes cuda:(LOCAL_RANK mod the CUDA devices this process
// sees): one GPU per process on a machine, and cuda:0 under a launcher that shows each process its own GPU alone.
// An indexed CUDA device with several processes on the machine is a UsageError: they would all train on that one
// GPU, which NCCL refuses with an error about a peer. Anything else is returned as given.
std::string rank_device(const std::string& device, const Environment& env, int64_t cuda_devices);

}  // namespace cabert::dist
