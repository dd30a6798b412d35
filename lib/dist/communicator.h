// The ranks of a data-parallel job talking to each other through PyTorch's c10d: a TCPStore at
// MASTER_ADDR:MASTER_PORT (rank 0 serves it) and ProcessGroupGloo on CPU or ProcessGroupNCCL on CUDA.
// A Communicator of one process (world size 1) needs no network: every collective returns at once.
//
// Every collective waits at most the job's timeout; a peer that died or hangs turns into a cabert::Error
// naming this rank, the operation and the timeout ("rank 0 of 2: all-reduce of the step's metrics failed
// ...: a peer process died or did not answer within 300 s"), so no rank hangs.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/dist/environment.h"

namespace cabert::dist {

class GradientSync;

class Communicator {
 public:
  // World size 1: no process group.
  Communicator();
  ~Communicator();
  // Joins the job `env` describes (blocks until every rank arrived, or the timeout). Gloo for a CPU
  // device, NCCL for CUDA (when the build has it).
  Communicator(const Environment& env, const torch::Device& device, std::chrono::seconds timeout);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  bool distributed() const { return env_.world_size > 1; }
  std::chrono::seconds timeout() const { return timeout_; }
  // "rank 1 of 2" (messages).
  std::string describe() const;

  // Element-wise sums (and maxima) over the ranks, in place; `what` names the values in errors.
  void all_reduce_sum(std::vector<double>& values, const std::string& what);
  void all_reduce_max(std::vector<double>& values, const std::string& what);
  // Rank 0's values of every tensor, in place (parameters and buffers at start, optimizer state).
  void broadcast(std::vector<torch::Tensor>& tensors, const std::string& what);
  // Rank 0 receives every rank's bytes (in rank order); other ranks get {}. `key` must be unique per call.
  std::vector<std::string> gather_to_main(const std::string& bytes, const std::string& key);
  // Rank 0's bytes on every rank. `key` must be unique per call.
  std::string broadcast_bytes(const std::string& bytes, const std::string& key);
  void barrier(const std::string& what);

  // Bucketed gradient all-reduce for `parameters` that overlaps the backward (c10d::Reducer).
  std::unique_ptr<GradientSync> gradient_sync(const std::vector<torch::Tensor>& parameters);

  // Rethrows a failure of a collective as cabert::Error with this rank, `what` and the timeout.
  [[noreturn]] void fail(const std::string& what, const std::exception& error) const;

  struct Group;  // the c10d objects (communicator_group.h)

 private:
  Environment env_;
  std::chrono::seconds timeout_{300};
  torch::Device device_{torch::kCPU};
  std::unique_ptr<Group> group_;
};

// Averages gradients over the ranks during the backward: prepare(loss) before the backward of an update's
// last micro-batch (the earlier ones accumulate locally, like DDP's no_sync).
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void prepare(const torch::Tensor& loss) = 0;
};

}  // namespace cabert::dist
