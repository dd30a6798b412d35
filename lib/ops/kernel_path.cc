#include "lib/ops/kernel_path.h"

#include <atomic>

#include "lib/core/errors.h"

namespace cabert::ops {
namespace {

std::atomic<KernelPath> current_path{KernelPath::kFused};

}  // namespace

void set_kernel_path(KernelPath path) { current_path.store(path); }

KernelPath kernel_path() { return current_path.load(); }

KernelPath parse_kernel_path(const std::string& name) {
  if (name == "fused") return KernelPath::kFused;
  if (name == "reference") return KernelPath::kReference;
  throw UsageError(str("--kernels: expected fused or reference, got '", name, "'"));
}

std::string kernel_path_name(KernelPath path) { return path == KernelPath::kFused ? "fused" : "reference"; }

}  // namespace cabert::ops
