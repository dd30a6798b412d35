// The draw of a Philox dropout mask (kernels/dropout_kernels.h has the scheme and the entry points): the types
// the routes of dropout and attention take, apart from the entry points that choose them.
#pragma once

#include <cstdint>

#include "kernels/philox.h"

namespace cabert::kernels {

struct DropoutDraw {
  double p = 0;  // probability of dropping, in [0, 1); 0: no dropout
  uint64_t seed = 0, offset = 0;
};

// Where a tensor's elements sit in the scheme's index space when it is a block of a larger tensor: viewed as
// [size(0), rest] (row-major), element (a, e) has index first + a row_stride + e. The default is the tensor
// itself (first 0, rows back to back). The chunked attention path draws a [B N, rows, T] block of queries
// i0 .. i0 + rows of the [B, N, T, T] probabilities with first = i0 T, row_stride = T T.
struct DrawIndex {
  uint64_t first = 0;
  uint64_t row_stride = 0;  // 0: the row length (rows back to back)
};

// The index runs a kernel walks for a tensor (kernels/philox.h; draw_runs in kernels/dropout_kernels.h).
using philox::DrawRuns;

}  // namespace cabert::kernels
