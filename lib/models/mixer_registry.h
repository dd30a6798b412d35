// The mixer families cabert builds, one row each in an explicit table (mixer_registry.cc; no static
// initialisers, so a static link cannot drop one). Adding a family: its mixer file, one row here, one
// preset (lib/config/presets.cc) and one reference test.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "formats/model.pb.h"
#include "lib/models/mixer.h"

namespace cabert::models {

struct MixerFamily {
  pb::EncoderFamily family;
  const char* name;         // for messages: "bert", "convbert", ...
  const char* module_name;  // the layer's member name, part of every checkpoint tensor name
  std::shared_ptr<Mixer> (*build)(const pb::ModelConfig& config, int64_t layer_index);
  // Multiply-adds per token of the position mixing itself (not the Linear layers) at sequence length T,
  // for the analytic FLOP counts of `cabert bench`.
  double (*mixing_macs_per_token)(const pb::ModelConfig& config, int64_t layer_index, int64_t T);
  // Groups of the layer's feed-forward (ConvBERT's grouped linear); nullptr = 1.
  int64_t (*feed_forward_groups)(const pb::ModelConfig& config);
  // The family's causal mixer for decoder layer `layer_index` of an encoder-decoder, from the decoder's view
  // of the config (seq2seq_decoder_config in lib/models/seq2seq_model.h); nullptr = the family has no causal
  // form.
  std::shared_ptr<Mixer> (*build_causal)(const pb::ModelConfig& decoder_config, int64_t layer_index);
};

const std::vector<MixerFamily>& mixer_families();
// Throws UsageError naming the known families for a family value no row describes.
const MixerFamily& mixer_family(pb::EncoderFamily family);

}  // namespace cabert::models
