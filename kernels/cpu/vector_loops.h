// The innermost loops of the CPU kernels: contiguous, restrict-qualified, written so the compiler vectorises
// them (kernels/CMakeLists.txt builds kernels/cpu with -fopenmp-simd, which lets `omp simd reduction`
// vectorise the dot product without -ffast-math).
#pragma once

#include <cstdint>

namespace cabert::kernels::cpu {

template <typename T>
inline void add_scaled(T* __restrict out, T scale, const T* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += scale * x[i];
}

template <typename T>
inline void add_product(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += a[i] * b[i];
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
