#include "lib/models/layers.h"

#include <limits>

#include "lib/core/errors.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/dropout_ops.h"

namespace cabert::models {

torch::Tensor DropoutImpl::forward(const torch::Tensor& x) { return ops::dropout(x, p, is_training()); }

EmbeddingsImpl::EmbeddingsImpl(const pb::ModelConfig& config) : max_length(config.max_length()) {
  const int64_t E = config.embedding_size();
  token = register_module("token", torch::nn::Embedding(config.vocab_size(), E));
  segment = register_module("segment", torch::nn::Embedding(2, E));
  if (config.attention().absolute_positions()) {
    position = register_module("position", torch::nn::Embedding(config.max_length(), E));
  }
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({E}).eps(config.layer_norm_eps())));
  dropout = register_module("dropout", Dropout(config.dropout()));
}

torch::Tensor EmbeddingsImpl::forward(const torch::Tensor& ids, const torch::Tensor& segments) {
  const int64_t T = ids.size(1);
  if (T > max_length) throw Error(str("expected sequences of at most ", max_length, " tokens, got ", T));
  torch::Tensor x = token(ids) + segment(segments);
  if (position) x = x + position(torch::arange(T, ids.options())).unsqueeze(0);
  return dropout(norm(x));
}

GroupedLinearImpl::GroupedLinearImpl(int64_t in, int64_t out, int64_t groups_) : groups(groups_) {
  weight = register_parameter("weight", torch::empty({groups, in / groups, out / groups}));
  bias = register_parameter("bias", torch::zeros({out}));
  torch::nn::init::normal_(weight, 0.0, 0.02);
}

torch::Tensor GroupedLinearImpl::forward(const torch::Tensor& x) {
  auto sizes = x.sizes().vec();
  const int64_t rows = x.numel() / x.size(-1);
  torch::Tensor grouped = x.reshape({rows, groups, -1}).transpose(0, 1);  // [g, rows, in/g]
  torch::Tensor y = torch::bmm(grouped, weight).transpose(0, 1).reshape({rows, -1});
  sizes.back() = y.size(-1);
  return (y + bias).view(sizes);
}

FeedForwardImpl::FeedForwardImpl(int64_t hidden, int64_t intermediate, int64_t groups,
                                 pb::FfnActivation activation_)
    : activation(activation_) {
  if (groups > 1) {
    grouped_in = register_module("grouped_in", GroupedLinear(hidden, intermediate, groups));
    grouped_out = register_module("grouped_out", GroupedLinear(intermediate, hidden, groups));
  } else {
    in = register_module("in", torch::nn::Linear(hidden, intermediate));
    out = register_module("out", torch::nn::Linear(intermediate, hidden));
  }
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  if (grouped_in) return grouped_out(activate(grouped_in(x)));
  return out(activate(in(x)));
}

torch::Tensor FeedForwardImpl::activate(const torch::Tensor& x) const {
  return activation == pb::RELU ? torch::relu(x) : torch::gelu(x);
}

SeparableConvImpl::SeparableConvImpl(int64_t in, int64_t out, int64_t kernel_, bool with_bias, bool gelu_)
    : kernel(kernel_), gelu(gelu_) {
  depthwise_weight = register_parameter("depthwise_weight", torch::empty({in, kernel}));
  torch::nn::init::normal_(depthwise_weight, 0.0, 0.02);
  if (with_bias) depthwise_bias = register_parameter("depthwise_bias", torch::zeros({in}));
  pointwise = register_module("pointwise", torch::nn::Linear(in, out));
}

torch::Tensor SeparableConvImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor y = ops::depthwise_conv(x, depthwise_weight, depthwise_bias, kernel / 2, mask);
  if (gelu) y = torch::gelu(y);
  return pointwise(y);
}

torch::Tensor key_padding_bias(const torch::Tensor& mask, torch::ScalarType dtype) {
  torch::Tensor bias = torch::zeros(mask.sizes(), mask.options().dtype(dtype));
  // The most negative finite value of the scores' dtype (bfloat16 and float16 under autocast included).
  double lowest = static_cast<double>(std::numeric_limits<float>::lowest());
  if (dtype == torch::kDouble) lowest = std::numeric_limits<double>::lowest();
  if (dtype == torch::kBFloat16) lowest = static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
  if (dtype == torch::kHalf) lowest = static_cast<double>(std::numeric_limits<c10::Half>::lowest());
  return bias.masked_fill(mask.logical_not(), lowest).unsqueeze(1).unsqueeze(1);
}

void init_bert_weights(torch::nn::Module& module, double range) {
  torch::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {
    if (auto* linear = child->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = child->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, range);
    } else if (auto* norm = child->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

}  // namespace cabert::models
