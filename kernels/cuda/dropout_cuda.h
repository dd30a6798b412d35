// The CUDA kernel of Philox dropout: same contract as kernels/cpu/dropout_cpu.h (kernels/dropout_kernels.h
// has the scheme), on CUDA tensors. Compiled only when CABERT_WITH_CUDA is defined.
#pragma once

#include <ATen/ATen.h>

#include "kernels/dropout_draw.h"

namespace cabert::kernels::cuda {

// x contiguous on a CUDA device, 0 < p < 1; the runs of x's elements (draw_runs).
at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs);

}  // namespace cabert::kernels::cuda
