// Fused CPU kernels of the convolution-branch ops (kernels/conv_contract.h: the contract, shared with
// kernels/cuda/conv_cuda.h). Work is split over batch x channel blocks (or batch x heads) with at::parallel_for;
// the innermost loops run over contiguous channels and vectorise.
#pragma once

#include "kernels/conv_contract.h"

namespace cabert::kernels::cpu {

conv_contract::GroupedConvForward grouped_conv_forward;
conv_contract::GroupedConvBackward grouped_conv_backward;
conv_contract::DynamicConvForward dynamic_conv_forward;
conv_contract::DynamicConvBackward dynamic_conv_backward;
conv_contract::RelposExpand relpos_expand;
conv_contract::RelposReduce relpos_reduce;

}  // namespace cabert::kernels::cpu
