#include "kernels/reference/attention_reference.h"

#include <ATen/Dispatch.h>

#include <limits>

#include "kernels/dropout_kernels.h"
#include "kernels/reference/conv_reference.h"

namespace cabert::kernels::reference {

at::Tensor relative_attention_bias(const AttentionInputs& in) {
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2);
  at::Tensor bias;
  if (in.query_band.defined() || in.key_band.defined()) {
    at::Tensor index = relative_index_matrix(T, in.radius, in.q.device()).expand({B, N, T, T});  // [i, j] -> r(i, j)
    if (in.query_band.defined()) bias = in.query_band.gather(3, index);
    // key_band[j, r(j, i)]: the same gather with rows j, then transposed to [i, j].
    if (in.key_band.defined()) {
      at::Tensor key_terms = in.key_band.gather(3, index).transpose(-1, -2);
      bias = bias.defined() ? bias + key_terms : key_terms;
    }
  }
  if (in.key_mask.defined()) {
    double lowest = 0;  // the dtype's own lowest value (float's would be -inf in bfloat16)
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.q.scalar_type(), "relative_attention_bias",
                                    [&] { lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
    at::Tensor padding =
        at::zeros({B, 1, 1, T}, in.q.options()).masked_fill(in.key_mask.logical_not().view({B, 1, 1, T}), lowest);
    bias = bias.defined() ? bias + padding : padding;
  }
  return bias;
}

at::Tensor relative_attention(const AttentionInputs& in, at::Tensor* probabilities) {
  at::Tensor scores = at::matmul(in.q, in.k.transpose(-1, -2)) * in.scale;
  at::Tensor bias = relative_attention_bias(in);
  if (bias.defined()) scores = scores + bias;
  at::Tensor p = at::softmax(scores, -1);
  if (probabilities != nullptr) *probabilities = p;
  if (in.dropout.p > 0) p = dropout_reference(p, in.dropout);
  return at::matmul(p, in.v);
}

}  // namespace cabert::kernels::reference
