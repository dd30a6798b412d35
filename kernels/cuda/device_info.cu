// The CUDA side of kernels/build_info.h: device properties and the caching allocator's peak, for `cabert
// selftest` and `cabert bench --device cuda`.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "kernels/build_info.h"

namespace cabert::kernels {

std::vector<CudaDevice> cuda_devices() {
  std::vector<CudaDevice> devices;
  const int count = at::cuda::is_available() ? static_cast<int>(at::cuda::device_count()) : 0;
  for (int i = 0; i < count; ++i) {
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(i);
    devices.push_back({i, properties->name, properties->major, properties->minor,
                       static_cast<int64_t>(properties->totalGlobalMem), properties->multiProcessorCount});
  }
  return devices;
}

void reset_cuda_peak_memory(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

int64_t cuda_peak_memory_bytes(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

}  // namespace cabert::kernels
