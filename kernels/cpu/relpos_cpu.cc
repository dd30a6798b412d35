// The scatter and gather between the [T, 2n+1] band of relative-position terms and the [T, T] score matrix.
// Rows (batch, head, query position) are independent; the clipped tails are constant runs (forward) and sums
// (backward), so each row costs O(T + n) whatever the radius.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/conv_math.h"
#include "kernels/cpu/conv_cpu.h"
#include "kernels/cpu/vector_loops.h"

namespace cabert::kernels::cpu {
namespace {

constexpr int64_t kRowGrain = 16;

// The scatter/gather is memory-bound and cheap next to the matmuls around it: below ~4M score elements it
// runs on the calling thread. Measured: with OpenMP's default active waiting on a loaded 2-core machine,
// parallelising it inside a model step (between MKL matmuls) made BERT-small composite steps 20x slower.
int64_t relpos_grain(int64_t rows, int64_t length) {
  constexpr int64_t kParallelElements = int64_t{1} << 22;
  if (rows * length < kParallelElements) return rows;
  return std::max(kRowGrain, grain_for(length));
}

template <typename T>
void expand_rows(const T* band, const T* beta, T* out, int64_t batch, int64_t heads, int64_t length, int64_t radius) {
  const int64_t width = 2 * radius + 1;
  at::parallel_for(
      0, batch * heads * length, relpos_grain(batch * heads * length, length), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t i = row % length, h = (row / length) % heads;
          const T* band_row = band ? band + row * width : nullptr;
          const T* beta_row = beta ? beta + h * width : nullptr;
          auto value = [&](int64_t r) { return (band_row ? band_row[r] : T(0)) + (beta_row ? beta_row[r] : T(0)); };
          T* o = out + row * length;
          const int64_t band_begin = math::max64(0, i - radius), band_end = math::min64(length, i + radius + 1);
          fill(o, value(0), band_begin);
          for (int64_t j = band_begin; j < band_end; ++j) o[j] = value(j - i + radius);
          fill(o + band_end, value(width - 1), length - band_end);
        }
      });
}

template <typename T>
void reduce_rows(const T* grad, T* band_grad, int64_t rows, int64_t length, int64_t radius) {
  const int64_t width = 2 * radius + 1;
  at::parallel_for(0, rows, relpos_grain(rows, length), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % length;
      const T* g = grad + row * length;
      T* out = band_grad + row * width;
      for (int64_t r = 0; r < width; ++r) out[r] = math::relpos_band_grad_element(g, i, r, length, radius);
    }
  });
}

}  // namespace

at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads, int64_t length,
                         int64_t radius) {
  const at::Tensor& like = band.defined() ? band : beta;
  at::Tensor out = at::empty({batch, heads, length, length}, like.options());
  AT_DISPATCH_FLOATING_TYPES(like.scalar_type(), "relpos_expand", [&] {
    expand_rows<scalar_t>(band.defined() ? band.data_ptr<scalar_t>() : nullptr,
                          beta.defined() ? beta.data_ptr<scalar_t>() : nullptr, out.data_ptr<scalar_t>(), batch, heads,
                          length, radius);
  });
  return out;
}

at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius) {
  const int64_t length = grad.size(3);
  at::Tensor band_grad = at::empty({grad.size(0), grad.size(1), length, 2 * radius + 1}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "relpos_reduce", [&] {
    reduce_rows<scalar_t>(grad.data_ptr<scalar_t>(), band_grad.data_ptr<scalar_t>(),
                          grad.size(0) * grad.size(1) * length, length, radius);
  });
  return band_grad;
}

}  // namespace cabert::kernels::cpu
