// Communicator::gradient_sync: c10d::Reducer, the engine under PyTorch's DistributedDataParallel. It hooks
// every parameter's gradient accumulator; a bucket (~25 MiB, the first 1 MiB) is all-reduced as soon as
// the backward has produced all its gradients, while the backward goes on with earlier layers, and the
// averaged gradients are written back into .grad before backward() returns.
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>

#include "lib/dist/c10d_group.h"

namespace cabert::dist {
namespace {

constexpr int64_t kBucketBytes = 25 << 20;      // DDP's bucket_cap_mb default
constexpr int64_t kFirstBucketBytes = 1 << 20;  // DDP's first bucket

// The Reducer warns once when find_unused_parameters finds nothing unused (the common case for the
// pre-training models): we chose the flag knowingly, so that one warning is dropped; others pass on.
class UnusedParameterWarningFilter : public c10::WarningHandler {
 public:
  explicit UnusedParameterWarningFilter(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("find_unused_parameters=True was specified") != std::string::npos) return;
    next_->process(warning);
  }

 private:
  c10::WarningHandler* next_;
};

void filter_unused_parameter_warning() {
  static UnusedParameterWarningFilter filter(c10::WarningUtils::get_warning_handler());
  c10::WarningUtils::set_warning_handler(&filter);
}

class ReducerSync : public GradientSync {
 public:
  ReducerSync(const std::vector<torch::Tensor>& parameters, c10::intrusive_ptr<c10d::ProcessGroup> group,
              Communicator* communicator)
      : communicator_(communicator) {
    filter_unused_parameter_warning();
    for (const auto& p : parameters) {
      if (p.requires_grad()) parameters_.push_back(p);
    }
    const std::vector<bool> sparse(parameters_.size(), false);
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        parameters_, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(kBucketBytes)}, sparse);
    // Gradients arrive roughly in reverse definition order: the last-defined parameters' bucket goes first.
    std::reverse(buckets.begin(), buckets.end());
    std::vector<int64_t> limits_for_rebuild(limits.rbegin(), limits.rend());
    // find_unused_parameters: a task head may not use every parameter (mean pooling skips the pooler); the
    // Reducer then marks those ready itself instead of waiting for a gradient that never comes.
    reducer_ = std::make_unique<c10d::Reducer>(
        parameters_, std::move(buckets), std::move(group), sparse, kBucketBytes, /*find_unused_parameters=*/true,
        /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string>{}, kFirstBucketBytes,
        /*skip_all_reduce_unused_params=*/false,
        /*use_python_reducer=*/false, std::move(limits_for_rebuild));
  }

  void prepare(const torch::Tensor& loss) override {
    try {
      reducer_->prepare_for_backward({loss});
    } catch (const std::exception& error) {
      communicator_->fail("preparing the gradient all-reduce", error);
    }
  }

 private:
  Communicator* communicator_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

class NoSync : public GradientSync {
 public:
  void prepare(const torch::Tensor&) override {}
};

}  // namespace

std::unique_ptr<GradientSync> Communicator::gradient_sync(const std::vector<torch::Tensor>& parameters) {
  if (!distributed()) return std::make_unique<NoSync>();
  return std::make_unique<ReducerSync>(parameters, group_->process_group, this);
}

}  // namespace cabert::dist
