// Philox dropout on the CPU: each thread takes whole chunks of up to kChunk elements of a run of consecutive
// indices, draws the counter blocks the chunk meets with the lane form, and compares them in one pass.
#include "kernels/cpu/dropout_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/cpu/philox_lanes.h"
#include "kernels/philox.h"

namespace cabert::kernels::cpu {
namespace {

constexpr int64_t kChunk = 4096;  // elements: 16 KiB of words on the stack

// body(first, count, draws): draws[c] is the draw of element first + c of the tensor, for c < count; the
// elements go in chunks of at most kChunk within each run (kernels/dropout_kernels.h), in parallel.
template <typename Body>
void for_each_chunk(const DropoutDraw& draw, const DrawRuns& runs, const Body& body) {
  const int64_t chunks_per_run = (runs.length + kChunk - 1) / kChunk;
  at::parallel_for(0, runs.rows * chunks_per_run, 1, [&](int64_t begin, int64_t end) {
    uint32_t words[kChunk + 8];  // a chunk's indices start at any word of a block: one block more
    for (int64_t item = begin; item < end; ++item) {
      const int64_t run = item / chunks_per_run, in_run = item % chunks_per_run * kChunk;
      const int64_t count = std::min(kChunk, runs.length - in_run);
      const uint64_t start = runs.first + run * runs.stride + in_run;
      const uint64_t first_block = start >> 2, last_block = (start + count - 1) >> 2;
      philox_words(draw.seed, draw.offset, first_block, static_cast<int64_t>(last_block - first_block + 1), words);
      body(run * runs.length + in_run, count, words + (start & 3));
    }
  });
}

template <typename T>
void apply_typed(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs, at::Tensor& y) {
  using Acc = at::opmath_type<T>;  // float for float, half and bfloat16; double for double
  const T* in = x.const_data_ptr<T>();
  T* out = y.data_ptr<T>();
  const float p = static_cast<float>(draw.p);
  const Acc kept = static_cast<Acc>(1.0 / (1.0 - draw.p));  // as ATen rounds a double scalar factor
  // Captured by value and restrict-qualified: through references the compiler reloaded p and kept per element
  // (the output might alias them) and left the loop scalar, at 3x the cost of the draws themselves.
  for_each_chunk(draw, runs, [in, out, p, kept](int64_t first, int64_t count, const uint32_t* words) {
    const T* __restrict src = in + first;
    T* __restrict dst = out + first;
#pragma omp simd
    for (int64_t c = 0; c < count; ++c) {
      dst[c] = static_cast<T>(philox::uniform(words[c]) >= p ? static_cast<Acc>(src[c]) * kept : Acc(0));
    }
  });
}

}  // namespace

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "philox_dropout_cpu",
                                  [&] { apply_typed<scalar_t>(x, draw, runs, y); });
  return y;
}

}  // namespace cabert::kernels::cpu
