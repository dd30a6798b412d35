// The tiled CUDA kernels of the composite attention (`--cuda-attention tiles`; kernels/cuda/attention_cuda_kernels.cuh
// has the scheme): same contracts as kernels/attention_kernels.h's entry points, on checked CUDA inputs with the
// relative terms as bands. Compiled only when CABERT_WITH_CUDA is defined.
#pragma once

#include "kernels/attention_types.h"

namespace cabert::kernels::cuda {

// Float or double, a head size of at most 128, every batch row with a real key.
bool tiled_attention_takes(const AttentionInputs& in);
AttentionOutputs tiled_attention_forward(const AttentionInputs& in);
AttentionGrads tiled_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                        const AttentionOutputs& forward);

}  // namespace cabert::kernels::cuda
