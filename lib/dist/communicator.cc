#include "lib/dist/communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(CABERT_WITH_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/dist/c10d_group.h"

namespace cabert::dist {
namespace {

using Seconds = std::chrono::seconds;

torch::Tensor doubles_tensor(const std::vector<double>& values, const torch::Device& device) {
  return torch::tensor(values, torch::kFloat64).to(device);
}

// c10d's messages carry a C++ backtrace after the first line.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void copy_back(const torch::Tensor& tensor, std::vector<double>& values) {
  torch::Tensor cpu = tensor.to(torch::kCPU).contiguous();
  const double* data = cpu.data_ptr<double>();
  std::copy(data, data + values.size(), values.begin());
}

}  // namespace

Communicator::Communicator() = default;
Communicator::~Communicator() = default;

Communicator::Communicator(const Environment& env, const torch::Device& device, Seconds timeout)
    : env_(env), timeout_(timeout), device_(device) {
  if (!env.distributed()) return;
  group_ = std::make_unique<Group>();
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(env.master_port);
    store_options.isServer = env.rank == 0;
    store_options.numWorkers = env.world_size;
    store_options.timeout = timeout;
    group_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& error) {
    throw Error(str(describe(), ": could not reach the rendezvous at ", env.master_addr, ":", env.master_port,
                    " within ", timeout.count(),
                    " s (is rank 0 running, and is the port free?): ", first_line(error.what())));
  }
  auto process_group = c10::make_intrusive<c10d::ProcessGroup>(group_->store, env.rank, env.world_size);
  try {
    if (device.is_cuda()) {
#if defined(CABERT_WITH_NCCL)
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(group_->store, env.rank, env.world_size, options);
      process_group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      process_group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#else
      throw UsageError("data-parallel training on CUDA needs NCCL, and this build has none (configure with the "
                       "CUDA-enabled torch wheel and a CUDA toolkit)");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // Over loopback when the whole job is on this machine; else the interface this host name resolves to.
      const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
      options->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                       : c10d::ProcessGroupGloo::createDefaultDevice());
      auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group_->store, env.rank, env.world_size, options);
      process_group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
      process_group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    fail("joining the process group", error);
  }
  group_->process_group = process_group;
  log_debug(describe(), ": joined the process group at ", env.master_addr, ":", env.master_port);
}

std::string Communicator::describe() const { return str("rank ", env_.rank, " of ", env_.world_size); }

void Communicator::fail(const std::string& what, const std::exception& error) const {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  const std::string detail = c10_error != nullptr ? c10_error->what_without_backtrace() : error.what();
  throw Error(str(describe(), ": ", what, " failed: a peer process died or did not answer within ", timeout_.count(),
                  " s (--dist-timeout); stopping. c10d said: ", first_line(detail)));
}

void Communicator::all_reduce_sum(std::vector<double>& values, const std::string& what) {
  if (!distributed() || values.empty()) return;
  std::vector<torch::Tensor> tensors{doubles_tensor(values, device_)};
  try {
    group_->process_group->allreduce(tensors)->wait(timeout_);
  } catch (const std::exception& error) {
    fail("all-reduce of " + what, error);
  }
  copy_back(tensors[0], values);
}

void Communicator::all_reduce_max(std::vector<double>& values, const std::string& what) {
  if (!distributed() || values.empty()) return;
  std::vector<torch::Tensor> tensors{doubles_tensor(values, device_)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  try {
    group_->process_group->allreduce(tensors, options)->wait(timeout_);
  } catch (const std::exception& error) {
    fail("all-reduce of " + what, error);
  }
  copy_back(tensors[0], values);
}

void Communicator::broadcast(std::vector<torch::Tensor>& tensors, const std::string& what) {
  if (!distributed()) return;
  torch::NoGradGuard no_grad;
  try {
    // One call per tensor: c10d reads a vector as replicas of one tensor.
    for (auto& tensor : tensors) {
      std::vector<torch::Tensor> one{tensor};
      group_->process_group->broadcast(one)->wait(timeout_);
    }
  } catch (const std::exception& error) {
    fail("broadcast of " + what + " from rank 0", error);
  }
}

std::vector<std::string> Communicator::gather_to_main(const std::string& bytes, const std::string& key) {
  if (!distributed()) return {bytes};
  std::vector<std::string> gathered;
  try {
    group_->store->set(str(key, "/", env_.rank), bytes);
    if (is_main()) {
      for (int rank = 0; rank < env_.world_size; ++rank) {
        std::vector<uint8_t> value = group_->store->get(str(key, "/", rank));
        gathered.emplace_back(value.begin(), value.end());
      }
      for (int rank = 0; rank < env_.world_size; ++rank) group_->store->deleteKey(str(key, "/", rank));
    }
  } catch (const std::exception& error) {
    fail("gathering " + key + " on rank 0", error);
  }
  return gathered;
}

std::string Communicator::broadcast_bytes(const std::string& bytes, const std::string& key) {
  if (!distributed()) return bytes;
  try {
    if (is_main()) {
      group_->store->set(key, bytes);
      return bytes;
    }
    std::vector<uint8_t> value = group_->store->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& error) {
    fail("receiving " + key + " from rank 0", error);
  }
}

void Communicator::barrier(const std::string& what) {
  if (!distributed()) return;
  // An all-reduce rather than c10d's barrier: on NCCL it needs no device guess, and it waits with our timeout.
  std::vector<double> token{1.0};
  all_reduce_sum(token, what);
}

}  // namespace cabert::dist
