// What the kernels library was built with, for `cabert --version`, bench records and clear errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cabert::kernels {

// True when kernels/cuda was compiled in (nvcc and a CUDA-enabled LibTorch were found by CMake).
bool built_with_cuda();
// Throws cabert::UsageError("... built without CUDA ...") when a CUDA tensor reaches a kernel of a build
// without CUDA kernels.
void require_cuda_build(const char* op_name);
// The GPU code compiled into kernels/cuda: "sm_80 sm_86 sm_89 sm_90 compute_90" (SASS per architecture, PTX for
// the newest); empty without CUDA.
std::string cuda_architectures();
// "LibTorch 2.x.y, CUDA kernels: yes (architectures)/no, CPU kernels: native|portable, threads: N".
std::string describe_build();
// The vector instructions kernels/cpu was compiled for: "AVX-512", "AVX2", "SSE4.2" or "baseline x86-64" (or
// the target's name elsewhere).
std::string cpu_kernel_isa();

// The CUDA devices this process sees; names and sizes need a build with CUDA kernels (without one, the devices
// LibTorch counts are listed with name "unknown").
struct CudaDevice {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
};
std::vector<CudaDevice> cuda_devices();
// Which code of `architectures` (as cuda_architectures() lists them) a device of compute capability
// major.minor runs: "SASS sm_86", "SASS sm_80 (binary-compatible)", "PTX compute_90 (JIT-compiled)", or "" when
// none fits (the launch would fail with "no kernel image is available").
std::string cuda_image_for(const std::string& architectures, int major, int minor);
// Peak bytes the CUDA caching allocator has handed out on `device` since reset_cuda_peak_memory(device).
void reset_cuda_peak_memory(int device);
int64_t cuda_peak_memory_bytes(int device);

// True when kernels/cpu was compiled with -march=native (CMake option CABERT_NATIVE_KERNELS).
bool native_cpu_kernels();

}  // namespace cabert::kernels
