// Device time on CUDA, for `cabert bench --device cuda`: timing events recorded on a device's current stream
// (where cabert's ops, LibTorch's and autograd's backward queue their kernels), read after the last one has
// completed. A build without CUDA kernels has the class, and its constructor throws require_cuda_build's
// UsageError.
#pragma once

#include <memory>
#include <vector>

namespace cabert::kernels {

class CudaEventMarks {
 public:
  explicit CudaEventMarks(int device);
  ~CudaEventMarks();
  CudaEventMarks(const CudaEventMarks&) = delete;
  CudaEventMarks& operator=(const CudaEventMarks&) = delete;

  // Creates events for `marks` marks ahead, so that mark() only records (creating an event is host work
  // between two launches, which a launch-bound loop such as decoding would time).
  void reserve(int marks);
  // Records a timing event on the device's current stream: it completes when the work queued before it has.
  void mark();
  // Milliseconds of device time between each mark and the next (marks - 1 values, in order), after waiting for
  // the last mark; the marks are then cleared (their events kept for the next marks).
  std::vector<double> intervals_ms();

 private:
  struct Events;
  int device_;
  std::unique_ptr<Events> events_;
};

}  // namespace cabert::kernels
