// Philox dropout on the CPU: each thread takes whole chunks of kChunk elements (a multiple of four, so chunks
// start on a counter block), draws the chunk's words with the lane form, and compares them in one pass.
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

// body(first, count, words): words[c] is the draw of element first + c, for c < count.
template <typename Body>
void for_each_chunk(const DropoutDraw& draw, int64_t n, const Body& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    uint32_t words[kChunk];
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunk, count = std::min(kChunk, n - first);
      philox_words(draw.seed, draw.offset, static_cast<uint64_t>(first) / 4, (count + 3) / 4, words);
      body(first, count, words);
    }
  });
}

template <typename T>
void apply_typed(const at::Tensor& x, const DropoutDraw& draw, at::Tensor& y) {
  using Acc = at::opmath_type<T>;  // float for float, half and bfloat16; double for double
  const T* in = x.const_data_ptr<T>();
  T* out = y.data_ptr<T>();
  const float p = static_cast<float>(draw.p);
  const Acc kept = static_cast<Acc>(1.0 / (1.0 - draw.p));  // as ATen rounds a double scalar factor
  // Captured by value and restrict-qualified: through references the compiler reloaded p and kept per element
  // (the output might alias them) and left the loop scalar, at 3x the cost of the draws themselves.
  for_each_chunk(draw, x.numel(), [in, out, p, kept](int64_t first, int64_t count, const uint32_t* words) {
    const T* __restrict src = in + first;
    T* __restrict dst = out + first;
#pragma omp simd
    for (int64_t c = 0; c < count; ++c) {
      dst[c] = static_cast<T>(philox::uniform(words[c]) >= p ? static_cast<Acc>(src[c]) * kept : Acc(0));
    }
  });
}

}  // namespace

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "philox_dropout_cpu",
                                  [&] { apply_typed<scalar_t>(x, draw, y); });
  return y;
}

}  // namespace cabert::kernels::cpu
