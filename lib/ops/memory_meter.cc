#include "lib/ops/memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace cabert::ops {
namespace {

std::atomic<int64_t> current_bytes{0};
std::atomic<int64_t> peak_bytes{0};

// The wrapped DataPtr stays "simple" (context == data) because some LibTorch paths (raw_allocate, used by
// oneDNN among others) insist on it; the original DataPtr and its size live in a side table instead.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) { self_ = this; }

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr inner = base_->allocate(bytes);
    void* data = inner.get();
    if (data == nullptr) return inner;  // zero-byte tensors: nothing to count
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.emplace(data, Allocation{std::move(inner), static_cast<int64_t>(bytes)});
    }
    const int64_t now = current_bytes.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
    int64_t peak = peak_bytes.load();
    while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

 private:
  struct Allocation {
    c10::DataPtr inner;  // destroying it returns the memory to the wrapped allocator
    int64_t bytes;
  };

  static void release(void* data) {
    Allocation allocation;
    {
      std::lock_guard<std::mutex> lock(self_->mutex_);
      auto it = self_->live_.find(data);
      if (it == self_->live_.end()) return;
      allocation = std::move(it->second);
      self_->live_.erase(it);
    }
    current_bytes.fetch_sub(allocation.bytes);
  }

  static CountingCpuAllocator* self_;
  c10::Allocator* base_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> live_;
};

CountingCpuAllocator* CountingCpuAllocator::self_ = nullptr;

std::once_flag install_once;
std::atomic<bool> installed{false};

}  // namespace

void install_cpu_memory_meter() {
  std::call_once(install_once, [] {
    static CountingCpuAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
    installed.store(true);
  });
}

bool cpu_memory_meter_installed() { return installed.load(); }

int64_t cpu_tensor_bytes() { return current_bytes.load(); }

PeakMemoryScope::PeakMemoryScope() : baseline_(current_bytes.load()) { peak_bytes.store(baseline_); }

int64_t PeakMemoryScope::peak_extra_bytes() const { return peak_bytes.load() - baseline_; }

}  // namespace cabert::ops
