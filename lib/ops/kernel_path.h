// Which implementation the convolution ops run: the fused kernels (default; CPU or CUDA by the device of the
// input) or the plain-ATen reference (`--kernels reference`, the test oracle). One process-wide setting.
#pragma once

#include <string>

namespace cabert::ops {

enum class KernelPath { kFused, kReference };

// Process-wide; set once from the command line (--kernels fused|reference) before any model runs.
void set_kernel_path(KernelPath path);
KernelPath kernel_path();
// "fused" or "reference"; anything else is a UsageError naming the accepted values.
KernelPath parse_kernel_path(const std::string& name);
std::string kernel_path_name(KernelPath path);

// Sets the process-wide kernel path for one scope and restores the previous one on exit (also on exceptions).
class ScopedKernelPath {
 public:
  explicit ScopedKernelPath(KernelPath path) : previous_(kernel_path()) { set_kernel_path(path); }
  ~ScopedKernelPath() { set_kernel_path(previous_); }
  ScopedKernelPath(const ScopedKernelPath&) = delete;
  ScopedKernelPath& operator=(const ScopedKernelPath&) = delete;

 private:
  KernelPath previous_;
};

}  // namespace cabert::ops
