#include "lib/models/light_dynamic_conv_block.h"

#include <cmath>

#include "lib/ops/conv_ops.h"
#include "lib/ops/dropout_ops.h"

namespace cabert::models {

int64_t conv_dilation(const pb::ModelConfig& config, int64_t layer_index) {
  if (config.family() != pb::DILATEDCONV) return 1;
  const int64_t cycle = config.conv_block().dilation_cycle();
  return int64_t{1} << (cycle > 0 ? layer_index % cycle : layer_index);
}

ConvBlockImpl::ConvBlockImpl(const pb::ModelConfig& config, int64_t layer_index)
    : dynamic(config.family() == pb::DYNAMICCONV),
      dilated(config.family() == pb::DILATEDCONV),
      glu(config.conv_block().glu()),
      causal(config.conv_block().causal()),
      weight_dropout(config.conv_block().weight_dropout()),
      hidden(config.hidden_size()) {
  const auto& b = config.conv_block();
  kernel = b.kernel_sizes(std::min<int64_t>(layer_index, b.kernel_sizes_size() - 1));
  dilation = conv_dilation(config, layer_index);
  const int64_t span = (kernel - 1) * dilation;
  padding_left = causal ? span : (dilated ? span / 2 : kernel / 2);
  heads = dilated || !b.share_weights_across_channels() ? hidden
                                                        : (b.conv_heads() > 0 ? b.conv_heads() : config.num_heads());
  input = register_module("input", torch::nn::Linear(hidden, glu ? 2 * hidden : hidden));
  if (dynamic) {
    kernel_projection = register_module(
        "kernel_projection", torch::nn::Linear(torch::nn::LinearOptions(hidden, heads * kernel).bias(false)));
  } else if (dilated) {
    // torch.nn.Conv1d's default: uniform(+-1/sqrt(fan_in)), fan_in = k for a depthwise kernel.
    const double bound = 1.0 / std::sqrt(static_cast<double>(kernel));
    weight = register_parameter("weight", torch::empty({hidden, kernel}).uniform_(-bound, bound));
  } else {
    // fairseq's LightweightConv1dTBC.reset_parameters: xavier_uniform_ of its [H, 1, k] weight (fan_in k,
    // fan_out H k).
    torch::Tensor fairseq_shaped = torch::empty({heads, 1, kernel});
    torch::nn::init::xavier_uniform_(fairseq_shaped);
    weight = register_parameter("weight", fairseq_shaped.view({heads, kernel}).clone());
  }
}

torch::Tensor ConvBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor y = input(x);
  if (glu) y = torch::glu(y, -1);
  if (dilated) return ops::dilated_depthwise_conv(y, weight, dilation, padding_left, mask);
  if (dynamic) {
    torch::Tensor kernels = torch::softmax(kernel_projection(y).view({y.size(0), y.size(1), heads, kernel}), -1);
    if (probe) probe->conv_kernels = kernels.detach();
    kernels = ops::dropout(kernels, weight_dropout, is_training());
    return ops::dynamic_conv(y, kernels, padding_left, mask);
  }
  torch::Tensor normalised = ops::dropout(torch::softmax(weight, -1), weight_dropout, is_training());
  return ops::lightweight_conv(y, normalised, padding_left, mask);
}

torch::Tensor ConvBlockImpl::forward_step(const torch::Tensor& x_t, MixerState& state) {
  if (!decodes_incrementally()) return Mixer::forward_step(x_t, state);
  const int64_t N = x_t.size(0), C = hidden;
  torch::Tensor y = input(x_t);
  if (glu) y = torch::glu(y, -1);
  const int64_t span = (kernel - 1) * dilation;
  if (!state.inputs.defined()) state.inputs = torch::zeros({N, span, C}, y.options());
  // The window the causal convolution reads at this position: the (k-1)*dilation previous inputs and this one.
  torch::Tensor window = torch::cat({state.inputs, y}, 1);  // [N, span + 1, C]
  state.inputs = window.narrow(1, 1, span);
  if (dilated) {
    torch::Tensor taps = window.slice(1, 0, span + 1, dilation);  // [N, k, C], every dilation-th input
    return (taps * weight.t().unsqueeze(0)).sum(1, /*keepdim=*/true);
  }
  torch::Tensor kernels;  // [N, H, k]
  if (dynamic) {
    kernels = torch::softmax(kernel_projection(y).view({N, heads, kernel}), -1);
    kernels = ops::dropout(kernels, weight_dropout, is_training());
  } else {
    kernels = ops::dropout(torch::softmax(weight, -1), weight_dropout, is_training()).expand({N, heads, kernel});
  }
  torch::Tensor grouped = window.view({N, kernel, heads, C / heads});
  return torch::einsum("nkhd,nhk->nhd", {grouped, kernels}).reshape({N, 1, C});
}

double conv_block_mixing_macs(const pb::ModelConfig& c, int64_t layer_index, int64_t) {
  const auto& b = c.conv_block();
  if (b.kernel_sizes_size() == 0) return 0;
  const int index = static_cast<int>(std::min<int64_t>(layer_index, b.kernel_sizes_size() - 1));
  return static_cast<double>(b.kernel_sizes(index)) * c.hidden_size();
}

}  // namespace cabert::models
