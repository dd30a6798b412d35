#include "lib/config/presets.h"

#include <functional>
#include <sstream>

#include "lib/core/errors.h"

namespace cabert::config {
namespace {

using Config = pb::ModelConfig;

// BERT-small / BERT-base of Chang et al. Table 4 (vocab 30004, max length 128, n = 8).
Config bert_size(const std::string& size) {
  Config c;
  c.set_family(pb::BERT);
  c.set_vocab_size(30004);
  c.set_max_length(128);
  c.set_dropout(0.1f);
  c.set_attention_dropout(0.1f);
  c.set_layer_norm_eps(1e-12f);
  c.set_initializer_range(0.02f);
  c.set_mask_probability(0.15f);
  c.set_mask_token_fraction(0.8f);
  c.set_random_token_fraction(0.1f);
  c.mutable_attention()->set_relative_radius(8);
  auto* electra = c.mutable_electra();
  electra->set_generator_divisor(size == "base" ? 3 : 4);
  electra->set_discriminator_weight(50.0f);
  electra->set_generator_weight(1.0f);
  electra->set_mask_probability(0.15f);
  electra->set_mask_token_fraction(0.85f);
  electra->set_max_predictions_fraction(0.155f);
  if (size == "small") {
    c.set_embedding_size(128), c.set_hidden_size(256), c.set_num_layers(12), c.set_num_heads(4);
    c.set_intermediate_size(1024);
  } else if (size == "medium-small") {
    c.set_embedding_size(128), c.set_hidden_size(384), c.set_num_layers(12), c.set_num_heads(8);
    c.set_intermediate_size(1536);
  } else if (size == "base") {
    c.set_embedding_size(768), c.set_hidden_size(768), c.set_num_layers(12), c.set_num_heads(12);
    c.set_intermediate_size(3072);
  } else {  // tiny: for tests and smoke runs
    c.set_vocab_size(1000);
    c.set_embedding_size(32), c.set_hidden_size(64), c.set_num_layers(2), c.set_num_heads(2);
    c.set_intermediate_size(128);
    c.mutable_attention()->set_relative_radius(3);
    electra->set_generator_divisor(2);
  }
  return c;
}

struct AttentionVariant {
  const char* name;
  const char* description;
  std::function<void(pb::AttentionConfig*)> apply;
};

const std::vector<AttentionVariant>& attention_variants() {
  static const std::vector<AttentionVariant> variants = {
      {"absolute", "absolute position embeddings (BERT default)", [](auto* a) { a->set_absolute_positions(true); }},
      {"none", "no position information", [](auto*) {}},
      {"fixed", "fixed lightweight conv beta_h[r] (Raffel)", [](auto* a) { a->set_relative_fixed(true); }},
      {"dynamic", "dynamic lightweight conv q.W^C[r] (Shaw)", [](auto* a) { a->set_relative_dynamic(true); }},
      {"composite", "composite attention, Chang Eq. 6",
       [](auto* a) { a->set_relative_fixed(true), a->set_relative_dynamic(true); }},
      {"composite-key", "composite + key-based dynamic k.W^K'[r]",
       [](auto* a) { a->set_relative_fixed(true), a->set_relative_dynamic(true), a->set_relative_key(true); }},
      {"depthwise", "fixed depthwise conv of the values, Chang Eq. 7",
       [](auto* a) { a->set_depthwise_values(true); }},
      {"composite-depthwise", "composite + fixed depthwise",
       [](auto* a) { a->set_relative_fixed(true), a->set_relative_dynamic(true), a->set_depthwise_values(true); }},
      {"conv-qk", "depthwise-separable conv queries and keys in half the heads",
       [](auto* a) { a->set_conv_query(true), a->set_conv_key(true); }},
      {"conv-v", "depthwise-separable conv values in half the heads", [](auto* a) { a->set_conv_value(true); }},
      {"conv-qkv", "depthwise-separable conv queries, keys and values in half the heads",
       [](auto* a) { a->set_conv_query(true), a->set_conv_key(true), a->set_conv_value(true); }},
      {"composite-conv-qk", "composite + conv queries and keys",
       [](auto* a) {
         a->set_relative_fixed(true), a->set_relative_dynamic(true), a->set_conv_query(true), a->set_conv_key(true);
       }},
      {"composite-conv-v", "composite + conv values",
       [](auto* a) { a->set_relative_fixed(true), a->set_relative_dynamic(true), a->set_conv_value(true); }},
      {"composite-conv-qkv", "composite + conv queries, keys and values",
       [](auto* a) {
         a->set_relative_fixed(true), a->set_relative_dynamic(true), a->set_conv_query(true), a->set_conv_key(true);
         a->set_conv_value(true);
       }},
  };
  return variants;
}

Config convbert(const std::string& size) {
  Config c = bert_size(size);
  c.set_family(pb::CONVBERT);
  c.mutable_attention()->set_variant("absolute");
  c.mutable_attention()->set_absolute_positions(true);  // ELECTRA-style embeddings
  auto* cb = c.mutable_convbert();
  cb->set_head_ratio(2);
  cb->set_conv_kernel_size(size == "tiny" ? 5 : 9);
  cb->set_bottleneck(true);
  cb->set_conv_kind(pb::SDCONV);
  cb->set_ffn_groups(size == "medium-small" ? 2 : 1);
  return c;
}

Config conv_blocks(const std::string& size, pb::EncoderFamily family) {
  Config c = bert_size(size);
  c.set_family(family);
  c.mutable_attention()->set_variant("none");  // convolutions carry the position information
  auto* block = c.mutable_conv_block();
  if (size == "tiny") {
    for (int k : {3, 7}) block->add_kernel_sizes(k);
  } else {
    for (int k : {3, 7, 15, 31, 31, 31, 31}) block->add_kernel_sizes(k);
  }
  block->set_conv_heads(0);
  block->set_share_weights_across_channels(true);
  block->set_weight_dropout(0.1f);
  block->set_glu(true);
  block->set_causal(false);
  return c;
}

Config lightconv(const std::string& size) { return conv_blocks(size, pb::LIGHTCONV); }
Config dynamicconv(const std::string& size) { return conv_blocks(size, pb::DYNAMICCONV); }

// One row per mixer family beyond BERT's attention variants: the preset is "<prefix>-<size>" for each size.
// A new family adds its config builder above and one row here.
struct FamilyPresets {
  const char* prefix;
  std::vector<const char*> sizes;
  Config (*build)(const std::string& size);
  const char* description;  // followed by ", <size>" in the listing
};

const std::vector<FamilyPresets>& family_presets() {
  static const std::vector<FamilyPresets> rows = {
      {"convbert", {"tiny", "small", "medium-small", "base"}, convbert,
       "ConvBERT mixed attention (SDConv), ELECTRA-style embeddings"},
      {"lightconv", {"tiny", "small", "base"}, lightconv,
       "encoder of Wu et al. lightconv blocks (GLU, kernels 3,7,15,31...)"},
      {"dynamicconv", {"tiny", "small", "base"}, dynamicconv,
       "encoder of Wu et al. dynamicconv blocks (GLU, kernels 3,7,15,31...)"},
  };
  return rows;
}

struct Preset {
  std::string name, description;
  Config config;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = [] {
    std::vector<Preset> list;
    for (const char* size : {"tiny", "small", "base"}) {
      for (const auto& variant : attention_variants()) {
        Config c = bert_size(size);
        c.mutable_attention()->set_variant(variant.name);
        variant.apply(c.mutable_attention());
        std::string name = str("bert-", size, "-", variant.name);
        c.set_name(name);
        list.push_back({name, str("BERT-", size, ", ", variant.description), c});
      }
    }
    for (const auto& family : family_presets()) {
      for (const char* size : family.sizes) {
        Config c = family.build(size);
        std::string name = str(family.prefix, "-", size);
        c.set_name(name);
        list.push_back({name, str(family.description, ", ", size), c});
      }
    }
    return list;
  }();
  return all;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  return names;
}

std::string describe_presets() {
  std::ostringstream out;
  for (const auto& p : presets()) out << p.name << "\t" << p.description << "\n";
  return out.str();
}

pb::ModelConfig preset_config(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.name == name) return p.config;
  }
  throw UsageError(str("unknown model preset '", name, "'; expected one of `cabert pretrain --list-presets` or a ",
                       ".textproto file"));
}

bool is_preset(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.name == name) return true;
  }
  return false;
}

}  // namespace cabert::config
