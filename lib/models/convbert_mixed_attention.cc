#include "lib/models/convbert_mixed_attention.h"

#include <cmath>

#include "lib/ops/attention_ops.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/span_dynamic_conv.h"

namespace cabert::models {

MixedAttentionImpl::MixedAttentionImpl(const pb::ModelConfig& config)
    : kind(config.convbert().conv_kind()), kernel(config.convbert().conv_kernel_size()) {
  const auto& cb = config.convbert();
  const int64_t H = config.hidden_size(), N = config.num_heads();
  head_size = H / N;
  // Like the reference code, a ratio above the head count leaves one attention head.
  heads = cb.bottleneck() ? std::max<int64_t>(1, N / cb.head_ratio()) : N;
  attention_width = heads * head_size;
  conv_width = kind == pb::NO_CONV ? 0 : attention_width;
  query = register_module("query", torch::nn::Linear(H, attention_width));
  key = register_module("key", torch::nn::Linear(H, attention_width));
  value = register_module("value", torch::nn::Linear(H, attention_width));
  switch (kind) {
    case pb::SDCONV:
      key_conv = register_module("key_conv", SeparableConv(H, attention_width, kernel, false, false));
      conv_kernel = register_module("conv_kernel", torch::nn::Linear(attention_width, heads * kernel));
      conv_value = register_module("conv_value", torch::nn::Linear(H, attention_width));
      break;
    case pb::PLAIN_DYNAMIC:
      conv_kernel = register_module("conv_kernel", torch::nn::Linear(H, heads * kernel));
      conv_value = register_module("conv_value", torch::nn::Linear(H, attention_width));
      break;
    case pb::DEPTHWISE_SEPARABLE:
      key_conv = register_module("key_conv", SeparableConv(H, attention_width, kernel, false, false));
      break;
    default: break;
  }
  attention_dropout = register_module("attention_dropout", Dropout(config.attention_dropout()));
}

torch::Tensor MixedAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1);
  auto split = [&](const torch::Tensor& t) { return t.view({B, T, heads, head_size}).transpose(1, 2); };
  torch::Tensor q_flat = query(x);
  torch::Tensor q = split(q_flat), k = split(key(x)), v = split(value(x));
  // The attention heads are plain scaled dot-product attention: ops::composite_attention without relative
  // terms (PyTorch's SDPA on the fused path, cabert's tiled kernel when training on the CPU with dropout, the
  // T x T reference when the pictures want the probabilities).
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_size));
  const double dropout_p = attention_dropout->active_p();
  torch::Tensor probabilities;
  torch::Tensor context = ops::composite_attention(q, k, v, ops::RelativePositionTerms{}, mask, scale, dropout_p,
                                                   probe ? &probabilities : nullptr);
  if (probe) probe->attention = probabilities.detach();
  context = context.transpose(1, 2).reshape({B, T, attention_width});
  if (kind == pb::NO_CONV) return context;

  torch::Tensor conv;
  if (kind == pb::DEPTHWISE_SEPARABLE) {
    conv = key_conv(x, mask);
  } else if (kind == pb::SDCONV) {
    torch::Tensor key_span = key_conv(x, mask);
    if (probe) {  // the kernels span_dynamic_conv generates (Eq. 4), for the pictures
      probe->conv_kernels = torch::softmax(conv_kernel(q_flat * key_span).view({B, T, heads, kernel}), -1).detach();
    }
    conv = ops::span_dynamic_conv(q_flat, key_span, conv_value(x), conv_kernel->weight, conv_kernel->bias, heads,
                                  kernel / 2, mask);
  } else {
    torch::Tensor kernels = torch::softmax(conv_kernel(x).view({B, T, heads, kernel}), -1);
    if (probe) probe->conv_kernels = kernels.detach();
    conv = ops::dynamic_conv(conv_value(x), kernels, kernel / 2, mask);
  }
  if (mask.defined()) conv = conv * mask.unsqueeze(-1).to(conv.scalar_type());
  return torch::cat({context, conv}, -1);
}

double mixed_attention_mixing_macs(const pb::ModelConfig& c, int64_t, int64_t T) {
  const auto& cb = c.convbert();
  const double H = c.hidden_size(), ratio = std::max(1, cb.head_ratio());
  const double width = cb.bottleneck() ? H / ratio : H;
  double macs = 2.0 * static_cast<double>(T) * width;
  if (cb.conv_kind() != pb::NO_CONV) macs += cb.conv_kernel_size() * width;  // the convolution itself
  if (cb.conv_kind() == pb::SDCONV || cb.conv_kind() == pb::DEPTHWISE_SEPARABLE) {
    macs += cb.conv_kernel_size() * H;  // depthwise part of the separable convolution
  }
  return macs;
}

}  // namespace cabert::models
