// Dropout with masks from a counter-based generator (kernels/philox.h): element e of a tensor (its row-major
// index over the sizes, whatever the strides) is kept when the draw of Philox block e / 4, word e % 4, under
// (seed, offset) is at least p, and kept elements are scaled by 1 / (1 - p). The mask is a pure function of
// (seed, offset, e), so nothing is saved for the backward (which is the same product applied to the
// gradient), every device and the reference draw the same mask, and a run is reproducible. The attention
// kernels use the same scheme on their [B, N, T, T] probabilities.
//
// A block of a larger tensor draws that tensor's mask for its elements (DrawIndex below).
//
// Entry points: CPU tensors -> kernels/cpu/dropout_cpu.cc (vector lanes, threaded), CUDA tensors ->
// kernels/cuda/dropout_cuda.cu (a build with CUDA kernels). The reference is dropout_keep: the mask itself.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "kernels/dropout_draw.h"

namespace cabert::kernels {

// The index runs a kernel walks for a tensor of these sizes (kernels/philox.h): rows back to back are one run.
// Checked: a stride shorter than a row would draw an index twice.
DrawRuns draw_runs(at::IntArrayRef sizes, const DrawIndex& index);

// x with the draw's mask applied: x_e / (1 - p) where element e is kept, 0 elsewhere; contiguous, x's dtype
// (float, double, half or bfloat16; the scale is applied in float, or double for double) and device.
at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawIndex& index = {});

// The keep-mask of the scheme for a tensor of these sizes: bool, on the CPU (the reference's and the tests').
at::Tensor dropout_keep(at::IntArrayRef sizes, const DropoutDraw& draw, const DrawIndex& index = {});

// The reference: x * keep * (1 / (1 - p)) in plain ATen (differentiable by autograd), with dropout_keep's mask
// moved to x's device and dtype. The attention reference applies it to the probabilities.
at::Tensor dropout_reference(const at::Tensor& x, const DropoutDraw& draw);

}  // namespace cabert::kernels
