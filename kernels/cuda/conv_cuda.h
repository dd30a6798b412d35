// CUDA kernels of the convolution-branch ops: the contract of kernels/conv_contract.h (shared with
// kernels/cpu/conv_cpu.h) on contiguous CUDA tensors. Compiled only when CABERT_WITH_CUDA is defined; the
// per-element maths is kernels/conv_math.h.
#pragma once

#include "kernels/conv_contract.h"

namespace cabert::kernels::cuda {

conv_contract::GroupedConvForward grouped_conv_forward;
conv_contract::GroupedConvBackward grouped_conv_backward;
conv_contract::DynamicConvForward dynamic_conv_forward;
conv_contract::DynamicConvBackward dynamic_conv_backward;
conv_contract::RelposExpand relpos_expand;
conv_contract::RelposReduce relpos_reduce;

}  // namespace cabert::kernels::cuda
