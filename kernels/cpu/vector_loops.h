// The innermost loops of the CPU kernels. Channels are processed in chunks of kLanes values (four cache
// lines) whose accumulators stay in vector registers across all taps of an output (one load of x, one load of
// the weight and one FMA per tap and vector); four independent FMA chains hide the FMA latency (a single
// chain was latency-bound, measured 2x slower). A scalar tail handles the last C % kLanes channels.
// kernels/CMakeLists.txt builds kernels/cpu with -fopenmp, so that `omp simd` vectorises these loops
// (and the dot-product reduction) without -ffast-math.
#pragma once

#include <cstdint>

namespace cabert::kernels::cpu {

template <typename T>
constexpr int64_t kLanes = 256 / sizeof(T);

// out[0, n) = init[0, n) (or 0 when init is null; init may be out itself) + sum over taps of
// coefficient(tap) * source(tap)[0, n), where `for_each_tap(f)` calls f(const T* coefficients_or_null,
// T scalar_coefficient, const T* source) for every contributing tap: per-channel coefficients (depthwise,
// lightweight) or one scalar (dynamic).
template <typename T, typename ForEachTap>
inline void accumulate_taps(T* out, const T* init, int64_t n, ForEachTap for_each_tap) {
  constexpr int64_t L = kLanes<T>;
  int64_t c = 0;
  for (; c + L <= n; c += L) {
    T acc[L];
#pragma omp simd
    for (int64_t v = 0; v < L; ++v) acc[v] = init ? init[c + v] : T(0);
    for_each_tap([&](const T* __restrict coefficients, T scalar, const T* __restrict source) {
      if (coefficients != nullptr) {
#pragma omp simd
        for (int64_t v = 0; v < L; ++v) acc[v] += coefficients[c + v] * source[c + v];
      } else {
#pragma omp simd
        for (int64_t v = 0; v < L; ++v) acc[v] += scalar * source[c + v];
      }
    });
#pragma omp simd
    for (int64_t v = 0; v < L; ++v) out[c + v] = acc[v];
  }
  for (; c < n; ++c) {
    T acc = init ? init[c] : T(0);
    for_each_tap([&](const T* coefficients, T scalar, const T* source) {
      acc += (coefficients != nullptr ? coefficients[c] : scalar) * source[c];
    });
    out[c] = acc;
  }
}

// Grain (tasks per chunk) for at::parallel_for such that a chunk holds at least ~64K multiply-adds: small
// problems then run inline on the calling thread instead of paying a thread wake-up per op.
inline int64_t grain_for(int64_t work_per_task) {
  constexpr int64_t kMinWorkPerChunk = int64_t{1} << 16;
  return work_per_task >= kMinWorkPerChunk ? 1 : kMinWorkPerChunk / (work_per_task > 0 ? work_per_task : 1);
}

template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T sum = T(0);
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

template <typename T>
inline void fill(T* __restrict out, T value, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

}  // namespace cabert::kernels::cpu
