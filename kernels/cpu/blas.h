// Row-major matrix products on one thread's tiles, through the BLAS LibTorch itself links (the wheel's MKL
// exports the Fortran symbols sgemm_ / dgemm_). Called from inside at::parallel_for tasks: MKL sees an
// active OpenMP region and runs each call on the calling thread.
#pragma once

#include <cstdint>

extern "C" {
void sgemm_(const char* trans_a, const char* trans_b, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
void dgemm_(const char* trans_a, const char* trans_b, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
}

namespace cabert::kernels::cpu {

// C[M x N] = alpha op(A) op(B) + beta C, all row-major with leading dimensions lda, ldb, ldc; op(A) is
// M x K (A stored K x M when trans_a). BLAS is column-major: a row-major matrix is its transpose there, so
// this computes C^T = op(B)^T op(A)^T.
template <typename T>
inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  if constexpr (sizeof(T) == sizeof(float)) {
    sgemm_(&tb, &ta, &m, &n, &k, &alpha, B, &lb, A, &la, &beta, C, &lc);
  } else {
    dgemm_(&tb, &ta, &m, &n, &k, &alpha, B, &lb, A, &la, &beta, C, &lc);
  }
}

}  // namespace cabert::kernels::cpu
