// The CUDA kernel of attention with banded relative-position biases: same contract as kernels/cpu/attention_cpu.h
// (kernels/attention_kernels.h has the formula), on CUDA tensors, head size at most kMaxHeadSize. Compiled only
// when CABERT_WITH_CUDA is defined; the per-row maths is kernels/attention_math.h.
#pragma once

#include "kernels/attention_kernels.h"

namespace cabert::kernels::cuda {

inline constexpr int64_t kMaxHeadSize = kMaxCudaHeadSize;

AttentionOutputs relative_attention_forward(const AttentionInputs& in);
AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward);

}  // namespace cabert::kernels::cuda
