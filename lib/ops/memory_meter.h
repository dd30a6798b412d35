// Honest peak-memory numbers for CPU benchmarks: a wrapper around LibTorch's CPU allocator counts the bytes
// held by tensors (every at::Tensor on CPU allocates through it). Library-internal scratch that bypasses
// the c10 allocator (oneDNN workspaces, BLAS buffers) is not counted; the bench records say so.
#pragma once

#include <cstdint>

namespace cabert::ops {

// Installs the counting allocator (idempotent). Tensors allocated before keep their original deleters.
void install_cpu_memory_meter();
bool cpu_memory_meter_installed();
// Bytes currently held by CPU tensors allocated since installation.
int64_t cpu_tensor_bytes();

// Measures the peak of cpu_tensor_bytes() above its value at construction, until peak_extra_bytes().
class PeakMemoryScope {
 public:
  PeakMemoryScope();
  int64_t peak_extra_bytes() const;

 private:
  int64_t baseline_;
};

}  // namespace cabert::ops
