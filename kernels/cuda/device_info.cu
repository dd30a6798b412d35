// The CUDA side of kernels/build_info.h and kernels/device_timing.h: device properties, the caching allocator's
// peak and timing events, for `cabert selftest` and `cabert bench --device cuda`.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/build_info.h"
#include "kernels/device_timing.h"

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

// The events in the order recorded; each is destroyed with the list (a destroy's own error is ignored: the
// list goes away when an earlier call has already thrown).
struct CudaEventMarks::Events {
  std::vector<cudaEvent_t> recorded;
  void destroy() {
    for (cudaEvent_t event : recorded) (void)cudaEventDestroy(event);
    recorded.clear();
  }
  ~Events() { destroy(); }
};

CudaEventMarks::CudaEventMarks(int device) : device_(device), events_(std::make_unique<Events>()) {}
CudaEventMarks::~CudaEventMarks() = default;

void CudaEventMarks::mark() {
  const c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  cudaEvent_t event = nullptr;
  C10_CUDA_CHECK(cudaEventCreate(&event));  // default flags: timing enabled
  events_->recorded.push_back(event);
  C10_CUDA_CHECK(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_))));
}

std::vector<double> CudaEventMarks::intervals_ms() {
  std::vector<double> intervals;
  const std::vector<cudaEvent_t>& events = events_->recorded;
  if (!events.empty()) {
    const c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
    C10_CUDA_CHECK(cudaEventSynchronize(events.back()));
    for (size_t i = 1; i < events.size(); ++i) {
      float ms = 0;
      C10_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i - 1], events[i]));
      intervals.push_back(ms);
    }
  }
  events_->destroy();
  return intervals;
}

}  // namespace cabert::kernels
