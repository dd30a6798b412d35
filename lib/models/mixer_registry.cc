#include "lib/models/mixer_registry.h"

#include <algorithm>

#include "lib/core/errors.h"
#include "lib/models/composite_attention.h"
#include "lib/models/convbert_mixed_attention.h"
#include "lib/models/decoder_attention.h"
#include "lib/models/light_dynamic_conv_block.h"

namespace cabert::models {
namespace {

std::shared_ptr<Mixer> build_self_attention(const pb::ModelConfig& config, int64_t) {
  return std::make_shared<BertSelfAttentionImpl>(config);
}

std::shared_ptr<Mixer> build_mixed_attention(const pb::ModelConfig& config, int64_t) {
  return std::make_shared<MixedAttentionImpl>(config);
}

std::shared_ptr<Mixer> build_conv_block(const pb::ModelConfig& config, int64_t layer_index) {
  return std::make_shared<ConvBlockImpl>(config, layer_index);
}

std::shared_ptr<Mixer> build_causal_attention(const pb::ModelConfig& config, int64_t) {
  return std::make_shared<CausalSelfAttentionImpl>(config.hidden_size(), config.num_heads(),
                                                   config.attention_dropout());
}

int64_t convbert_feed_forward_groups(const pb::ModelConfig& config) {
  return std::max(1, config.convbert().ffn_groups());
}

// One row per family. A new family adds its mixer file and one row here.
const std::vector<MixerFamily>& families() {
  static const std::vector<MixerFamily> table = {
      {pb::BERT, "bert", "attention", build_self_attention, self_attention_mixing_macs, nullptr,
       build_causal_attention},
      {pb::CONVBERT, "convbert", "attention", build_mixed_attention, mixed_attention_mixing_macs,
       convbert_feed_forward_groups, nullptr},
      {pb::LIGHTCONV, "lightconv", "conv", build_conv_block, conv_block_mixing_macs, nullptr, build_conv_block},
      {pb::DYNAMICCONV, "dynamicconv", "conv", build_conv_block, conv_block_mixing_macs, nullptr, build_conv_block},
      {pb::DILATEDCONV, "dilatedconv", "conv", build_conv_block, conv_block_mixing_macs, nullptr, build_conv_block},
  };
  return table;
}

}  // namespace

const std::vector<MixerFamily>& mixer_families() { return families(); }

const MixerFamily& mixer_family(pb::EncoderFamily family) {
  for (const auto& row : families()) {
    if (row.family == family) return row;
  }
  std::string known;
  for (const auto& row : families()) known += (known.empty() ? "" : ", ") + std::string(row.name);
  throw UsageError(str("unknown encoder family ", static_cast<int>(family), "; expected one of ", known));
}

}  // namespace cabert::models
