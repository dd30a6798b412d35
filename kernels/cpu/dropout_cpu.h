// The CPU kernels of Philox dropout (kernels/dropout_kernels.h has the scheme): the draws many counter
// blocks at a time in vector lanes (kernels/cpu/philox_lanes.h), chunks of the tensor in parallel.
#pragma once

#include <ATen/ATen.h>

#include "kernels/dropout_draw.h"

namespace cabert::kernels::cpu {

// x contiguous on the CPU, 0 < p < 1; the runs of x's elements (draw_runs).
at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs);

}  // namespace cabert::kernels::cpu
