// Runs CUDA kernel source on the CPU, so that the tests of kernels/cuda/*.cuh execute the kernels' own code (thread
// mapping, shared memory, barriers, warp shuffles) on a machine without a GPU. Include this header before a .cuh:
// it defines the CUDA keywords and built-ins that the kernels use.
//
// The blocks of a grid run one after the other on the calling thread; the threads of a block are fibers (ucontext)
// that run in turn, each until it reaches a barrier or ends, in alternating order (0 .. n-1, then n-1 .. 0). So a
// missing __syncthreads() shows as a wrong result (the first thread reads a shared tile before the others fill it,
// or refills it before they have read it), deterministically. The emulation is stricter than the hardware:
// - every thread of the block must reach the same __syncthreads() (file and line) before any goes on; a thread
//   that ends while others wait, or threads waiting at different barriers, fail the launch;
// - __shfl_xor_sync needs the full mask and the 32 lanes of a full warp at the same call.
// What it does not model: concurrency between blocks (they run in turn; the kernels here have no inter-block
// communication), memory ordering, speed, and uninitialised shared memory (`__shared__` arrays are
// zero-initialised thread_local statics, one per kernel instantiation, valid because one block runs at a time).
// A failure throws std::runtime_error from launch() naming the block, the threads and the source lines.
#pragma once

#if defined(__CUDACC__)
#error "tests/kernels/cuda_emulator.h is for host compilers: nvcc compiles the kernels for a real device"
#endif

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace cabert::testing::cuda_emulator {

struct Dim3 {
  unsigned int x = 1, y = 1, z = 1;
};

// The built-ins of the thread that runs now (only inside launch()).
const Dim3& thread_index();
const Dim3& block_index();
const Dim3& block_dim();
const Dim3& grid_dim();

// __syncthreads() at file:line.
void sync_threads(const char* file, int line);

// The calling lane publishes `bits`; once all 32 lanes of its warp have published at the same call, it receives
// the bits of lane `source_lane`.
uint64_t exchange_in_warp(uint64_t bits, int source_lane, unsigned mask, int width, const char* file, int line);

template <typename T>
T shfl_xor_sync(const char* file, int line, unsigned mask, T value, int lane_mask, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t), "a shuffled value fits 64 bits");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const int lane = static_cast<int>(thread_index().x % 32);
  bits = exchange_in_warp(bits, lane ^ lane_mask, mask, width, file, line);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// Runs thread_body once per thread of a grid of `grid` blocks of `block` threads.
void run_grid(Dim3 grid, Dim3 block, const std::function<void()>& thread_body);

// kernel<<<blocks, threads>>>(args...) on the CPU (one-dimensional grids and blocks, as the kernels here use).
template <typename Kernel, typename... Args>
void launch(unsigned blocks, unsigned threads, Kernel kernel, Args... args) {
  run_grid(Dim3{blocks, 1, 1}, Dim3{threads, 1, 1}, [&] { kernel(args...); });
}

// The launcher that kernels/cuda/*.cuh's host code takes (conv_cuda.cu's launches on the current CUDA stream): by
// default a grid as large as on a GPU; smaller ones make every block take several items of a grid-stride loop.
template <int64_t MaxBlocks = 65535, int64_t FillBlocks = 2048>
struct EmulatedLauncher {
  static constexpr int64_t kMaxBlocks = MaxBlocks;
  static constexpr int64_t kFillBlocks = FillBlocks;
  template <typename Kernel, typename... Args>
  static void run(int blocks, int threads, Kernel kernel, Args... args) {
    launch(static_cast<unsigned>(blocks), static_cast<unsigned>(threads), kernel, args...);
  }
};

}  // namespace cabert::testing::cuda_emulator

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define threadIdx (::cabert::testing::cuda_emulator::thread_index())
#define blockIdx (::cabert::testing::cuda_emulator::block_index())
#define blockDim (::cabert::testing::cuda_emulator::block_dim())
#define gridDim (::cabert::testing::cuda_emulator::grid_dim())
#define __syncthreads() ::cabert::testing::cuda_emulator::sync_threads(__FILE__, __LINE__)
#define __shfl_xor_sync(...) ::cabert::testing::cuda_emulator::shfl_xor_sync(__FILE__, __LINE__, __VA_ARGS__)
#define CABERT_CUDA_EMULATION 1
