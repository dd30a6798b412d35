#include "lib/models/decoder_layer.h"

#include "lib/core/errors.h"

namespace cabert::models {

DecoderLayerImpl::DecoderLayerImpl(std::shared_ptr<Mixer> decoder_mixer, const std::string& mixer_name,
                                   const DecoderLayerSizes& sizes)
    : normalize_mixer_output(sizes.normalize_mixer_output), normalize_before(sizes.normalize_before) {
  if (!decoder_mixer->decodes_incrementally()) {
    throw UsageError(str("decoder layer: expected a causal mixer, got ", decoder_mixer->name(),
                         " (a decoder must not see later target tokens)"));
  }
  const int64_t H = sizes.hidden;
  auto norm = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({H}).eps(sizes.layer_norm_eps)); };
  mixer = register_module(mixer_name, std::move(decoder_mixer));
  output = register_module("output", torch::nn::Linear(mixer->output_size(), H));
  mixer_norm = register_module("mixer_norm", norm());
  cross_attention = register_module("cross_attention", CrossAttention(H, sizes.heads, sizes.attention_dropout));
  cross_output = register_module("cross_output", torch::nn::Linear(H, H));
  cross_norm = register_module("cross_norm", norm());
  ffn = register_module("ffn", FeedForward(H, sizes.intermediate, 1, sizes.ffn_activation));
  ffn_norm = register_module("ffn_norm", norm());
  dropout = register_module("dropout", Dropout(sizes.dropout));
}

template <typename Mix>
torch::Tensor DecoderLayerImpl::mixer_sublayer(const torch::Tensor& x, Mix&& mix) {
  if (normalize_before) return x + dropout(output(mix(mixer_norm(x))));
  torch::Tensor projected = dropout(output(mix(x)));
  return normalize_mixer_output ? x + mixer_norm(projected) : mixer_norm(x + projected);
}

template <typename Attend>
torch::Tensor DecoderLayerImpl::cross_sublayer(const torch::Tensor& h, Attend&& attend) {
  if (normalize_before) return h + dropout(cross_output(attend(cross_norm(h))));
  return cross_norm(h + dropout(cross_output(attend(h))));
}

torch::Tensor DecoderLayerImpl::ffn_sublayer(const torch::Tensor& c) {
  if (normalize_before) return c + dropout(ffn(ffn_norm(c)));
  return ffn_norm(c + dropout(ffn(c)));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& target_mask,
                                        const torch::Tensor& memory, const torch::Tensor& memory_mask) {
  torch::Tensor h = mixer_sublayer(x, [&](const torch::Tensor& in) { return mixer->forward(in, target_mask); });
  torch::Tensor c = cross_sublayer(
      h, [&](const torch::Tensor& in) { return cross_attention(in, memory, memory_mask); });
  return ffn_sublayer(c);
}

void DecoderLayerImpl::start_decoding(const torch::Tensor& memory, DecoderLayerState& state) {
  state.self = MixerState();
  cross_attention->cache_memory(memory, state.cross);
}

torch::Tensor DecoderLayerImpl::forward_step(const torch::Tensor& x_t, const torch::Tensor& memory_mask,
                                             DecoderLayerState& state) {
  torch::Tensor h = mixer_sublayer(x_t, [&](const torch::Tensor& in) { return mixer->forward_step(in, state.self); });
  torch::Tensor c = cross_sublayer(
      h, [&](const torch::Tensor& in) { return cross_attention->forward_step(in, memory_mask, state.cross); });
  return ffn_sublayer(c);
}

}  // namespace cabert::models
