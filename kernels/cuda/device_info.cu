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

// The events, created on the marks' device and reused: the first `recorded` hold the marks in order. Each is
// destroyed with the pool (a destroy's own error is ignored: the pool may go away while an earlier call throws).
struct CudaEventMarks::Events {
  std::vector<cudaEvent_t> pool;
  size_t recorded = 0;
  void add() {
    cudaEvent_t event = nullptr;
    C10_CUDA_CHECK(cudaEventCreate(&event));  // default flags: timing enabled
    pool.push_back(event);
  }
  ~Events() {
    for (cudaEvent_t event : pool) (void)cudaEventDestroy(event);
  }
};

CudaEventMarks::CudaEventMarks(int device) : device_(device), events_(std::make_unique<Events>()) {}
CudaEventMarks::~CudaEventMarks() = default;

void CudaEventMarks::reserve(int marks) {
  const c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  while (events_->pool.size() < events_->recorded + static_cast<size_t>(marks)) events_->add();
}

void CudaEventMarks::mark() {
  const c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  if (events_->recorded == events_->pool.size()) events_->add();
  C10_CUDA_CHECK(cudaEventRecord(events_->pool[events_->recorded],
                                 c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_))));
  ++events_->recorded;  // only a recorded event counts as a mark
}

std::vector<double> CudaEventMarks::intervals_ms() {
  std::vector<double> intervals;
  const size_t marks = events_->recorded;
  events_->recorded = 0;
  if (marks == 0) return intervals;
  const c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  const std::vector<cudaEvent_t>& events = events_->pool;
  C10_CUDA_CHECK(cudaEventSynchronize(events[marks - 1]));
  for (size_t i = 1; i < marks; ++i) {
    float ms = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i - 1], events[i]));
    intervals.push_back(ms);
  }
  return intervals;
}

}  // namespace cabert::kernels
