#include "lib/models/composite_attention.h"

#include <cmath>

#include "lib/core/errors.h"
#include "lib/ops/attention_ops.h"
#include "lib/ops/conv_ops.h"

namespace cabert::models {

BertSelfAttentionImpl::BertSelfAttentionImpl(const pb::ModelConfig& config)
    : hidden(config.hidden_size()),
      heads(config.num_heads()),
      head_size(config.hidden_size() / config.num_heads()),
      radius(config.attention().relative_radius()) {
  const auto& a = config.attention();
  const int64_t K = 2 * radius + 1, half = hidden / heads * (heads / 2);
  auto projection = [&](const char* name, bool conv, torch::nn::Linear& linear, SeparableConv& sep) {
    if (conv) {
      sep = register_module(std::string(name) + "_conv", SeparableConv(hidden, half, K, true, true));
      linear = register_module(name, torch::nn::Linear(hidden, hidden - half));
    } else {
      linear = register_module(name, torch::nn::Linear(hidden, hidden));
    }
  };
  projection("query", a.conv_query(), query, query_conv);
  projection("key", a.conv_key(), key, key_conv);
  projection("value", a.conv_value(), value, value_conv);
  if (a.relative_fixed()) relative_beta = register_parameter("relative_beta", torch::zeros({heads, K}));
  if (a.relative_dynamic()) {
    relative_query =
        register_parameter("relative_query", torch::empty({K, head_size}).normal_(0.0, config.initializer_range()));
  }
  if (a.relative_key()) {
    relative_key =
        register_parameter("relative_key", torch::empty({K, head_size}).normal_(0.0, config.initializer_range()));
  }
  if (a.depthwise_values()) {
    depthwise_weight =
        register_parameter("depthwise_weight", torch::empty({hidden, K}).normal_(0.0, config.initializer_range()));
    depthwise_bias = register_parameter("depthwise_bias", torch::zeros({hidden}));
    depthwise_scale = register_parameter("depthwise_scale", torch::ones({heads}));
  }
  attention_dropout = register_module("attention_dropout", Dropout(config.attention_dropout()));
}

torch::Tensor BertSelfAttentionImpl::project(const torch::Tensor& x, const torch::Tensor& mask,
                                             torch::nn::Linear& linear, SeparableConv& conv) {
  if (!conv) return linear(x);
  return torch::cat({conv(x, mask), linear(x)}, -1);
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1);
  auto split = [&](const torch::Tensor& t) { return t.view({B, T, heads, head_size}).transpose(1, 2); };
  torch::Tensor v_flat = project(x, mask, value, value_conv);
  torch::Tensor q = split(project(x, mask, query, query_conv));
  torch::Tensor k = split(project(x, mask, key, key_conv));
  torch::Tensor v = split(v_flat);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_size));
  const torch::Tensor beta = shared_position_bias ? shared_position_bias->band() : relative_beta;
  const ops::RelativePositionTerms relative{relative_query, beta, relative_key, radius};
  const double dropout_p = attention_dropout->active_p();
  torch::Tensor probabilities;
  torch::Tensor context =
      ops::composite_attention(q, k, v, relative, mask, scale, dropout_p, probe ? &probabilities : nullptr);
  if (probe) probe->attention = probabilities.detach();
  context = context.transpose(1, 2).reshape({B, T, hidden});
  if (depthwise_weight.defined()) {
    torch::Tensor conv = ops::depthwise_conv(v_flat, depthwise_weight, depthwise_bias, radius, mask);
    context = context + conv * depthwise_scale.repeat_interleave(head_size);
  }
  return context;
}

void BertSelfAttentionImpl::share_position_bias(RelativePositionBias bias) {
  if (relative_beta.defined() || relative_query.defined() || relative_key.defined() || depthwise_weight.defined()) {
    throw UsageError("seq2seq.relative_buckets: T5's shared position bias replaces the attention's own relative "
                     "terms; expected attention variant none");
  }
  radius = bias->max_distance();
  shared_position_bias = std::move(bias);
}

double self_attention_mixing_macs(const pb::ModelConfig& c, int64_t, int64_t T) {
  const auto& a = c.attention();
  const double H = c.hidden_size(), window = 2.0 * a.relative_radius() + 1;
  double macs = 2.0 * static_cast<double>(T) * H;  // QK^T and AV
  if (a.relative_dynamic()) macs += window * H;
  if (a.relative_key()) macs += window * H;
  if (a.depthwise_values()) macs += window * H;
  macs += window * H * ((a.conv_query() ? 1 : 0) + (a.conv_key() ? 1 : 0) + (a.conv_value() ? 1 : 0));
  return macs;
}

}  // namespace cabert::models
