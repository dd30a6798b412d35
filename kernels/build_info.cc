#include "kernels/build_info.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <sstream>
#include <stdexcept>

#ifndef CABERT_WITH_CUDA
#include <torch/cuda.h>
#endif

#include "kernels/device_timing.h"
#include "lib/core/errors.h"

namespace cabert::kernels {

bool built_with_cuda() {
#ifdef CABERT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void require_cuda_build(const char* op_name) {
  if (!built_with_cuda()) {
    throw UsageError(str(op_name, ": a CUDA tensor reached a cabert built without CUDA kernels; rebuild with "
                                  "nvcc and a CUDA-enabled LibTorch (-DCABERT_CUDA=ON)"));
  }
}

bool native_cpu_kernels() {
#ifdef CABERT_NATIVE_KERNELS
  return true;
#else
  return false;
#endif
}

std::string cuda_architectures() {
#ifdef CABERT_CUDA_ARCHITECTURES
  return CABERT_CUDA_ARCHITECTURES;
#else
  return "";
#endif
}

std::string cuda_image_for(const std::string& architectures, int major, int minor) {
  const int capability = major * 10 + minor;
  std::istringstream words(architectures);
  std::string exact, compatible, ptx;
  int compatible_minor = -1, ptx_capability = -1;
  for (std::string word; words >> word;) {
    const bool sass = word.rfind("sm_", 0) == 0, virtual_arch = word.rfind("compute_", 0) == 0;
    if (!sass && !virtual_arch) continue;
    std::string digits = word.substr(sass ? 3 : 8);
    // Arch-specific code (sm_90a, compute_90a) runs on its own compute capability only; family-specific code
    // (sm_100f) on its major version at an equal or higher minor, like plain SASS.
    const char suffix = digits.empty() ? '\0' : digits.back();
    const bool arch_specific = suffix == 'a', family_specific = suffix == 'f';
    if (arch_specific || family_specific) digits.pop_back();
    if (digits.size() < 2 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const int number = std::stoi(digits), arch_major = number / 10, arch_minor = number % 10;
    const bool same_family = arch_major == major && arch_minor <= minor;
    if (sass) {
      if (number == capability && exact.empty()) exact = word;
      // SASS runs on the same major version at an equal or higher minor version.
      if (!arch_specific && same_family && arch_minor < minor && arch_minor > compatible_minor) {
        compatible = word;
        compatible_minor = arch_minor;
      }
    } else {
      // Plain PTX is JIT-compiled for any newer device, arch- and family-specific PTX within their range.
      const bool runs = arch_specific ? number == capability : family_specific ? same_family : number <= capability;
      if (runs && number > ptx_capability) {
        ptx = word;
        ptx_capability = number;
      }
    }
  }
  if (!exact.empty()) return "SASS " + exact;
  if (!compatible.empty()) return "SASS " + compatible + " (binary-compatible)";
  if (!ptx.empty()) return "PTX " + ptx + " (JIT-compiled)";
  return "";
}

#ifndef CABERT_WITH_CUDA
std::vector<CudaDevice> cuda_devices() {
  std::vector<CudaDevice> devices;
  for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) devices.push_back({i, "unknown", 0, 0, 0, 0});
  return devices;
}
void reset_cuda_peak_memory(int) { require_cuda_build("reset_cuda_peak_memory"); }
int64_t cuda_peak_memory_bytes(int) {
  require_cuda_build("cuda_peak_memory_bytes");
  return 0;
}
struct CudaEventMarks::Events {};
CudaEventMarks::CudaEventMarks(int device) : device_(device) { require_cuda_build("CUDA event timing"); }
CudaEventMarks::~CudaEventMarks() = default;
void CudaEventMarks::reserve(int) { require_cuda_build("CUDA event timing"); }
void CudaEventMarks::mark() { require_cuda_build(str("CUDA event timing on cuda:", device_).c_str()); }
std::vector<double> CudaEventMarks::intervals_ms() { return {}; }
#endif

std::string describe_build() {
  return str("LibTorch ", TORCH_VERSION,
             ", CUDA kernels: ", built_with_cuda() ? str("yes (", cuda_architectures(), ")") : std::string("no"),
             ", CPU kernels: ", native_cpu_kernels() ? "native (-march=native)" : "portable",
             ", intra-op threads: ", at::get_num_threads());
}

}  // namespace cabert::kernels
