// Named model configurations shipped with the binary: one row per preset in an explicit table
// (presets.cc). BERT-small/base follow Chang et al. Table 4; ConvBERT Jiang et al. section 4; the Wu et al.
// blocks fairseq's lightconv defaults; the encoder-decoders fairseq's lightconv/transformer architectures
// and Tay et al.'s BART-base sizes. Tiny sizes are for tests and smoke runs.
#pragma once

#include <string>
#include <vector>

#include "formats/model.pb.h"

namespace cabert::config {

// Throws UsageError naming `cabert pretrain --list-presets` when `name` is unknown.
pb::ModelConfig preset_config(const std::string& name);
bool is_preset(const std::string& name);
std::vector<std::string> preset_names();
// One line per preset: name, a tab and a short description.
std::string describe_presets();

}  // namespace cabert::config
