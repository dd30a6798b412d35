#include "lib/models/presets.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/files.h"

namespace cabert::models {
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
    for (const char* size : {"tiny", "small", "medium-small", "base"}) {
      Config c = convbert(size);
      std::string name = str("convbert-", size);
      c.set_name(name);
      list.push_back({name, str("ConvBERT-", size, ": mixed attention (SDConv), ELECTRA-style embeddings"), c});
    }
    for (const char* size : {"tiny", "small", "base"}) {
      for (auto family : {pb::LIGHTCONV, pb::DYNAMICCONV}) {
        Config c = conv_blocks(size, family);
        std::string kind = family == pb::LIGHTCONV ? "lightconv" : "dynamicconv";
        std::string name = str(kind, "-", size);
        c.set_name(name);
        list.push_back({name, str("encoder of Wu et al. ", kind, " blocks (GLU, kernels 3,7,15,31...), ", size), c});
      }
    }
    return list;
  }();
  return all;
}

// Protobuf text-format errors with file, line and column.
class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string file) : file_(std::move(file)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = str(file_, ":", line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string file_, first_;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
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

void apply_override(pb::ModelConfig* config, const std::string& assignment) {
  using google::protobuf::FieldDescriptor;
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) throw UsageError(str("--set expects key=value, got '", assignment, "'"));
  std::string key = trim(assignment.substr(0, eq)), value = trim(assignment.substr(eq + 1));
  google::protobuf::Message* message = config;
  std::stringstream path(key);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(path, part, '.')) parts.push_back(part);
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(parts[i]);
    if (field == nullptr) {
      std::string known;
      for (int f = 0; f < message->GetDescriptor()->field_count(); ++f) {
        known += (f ? ", " : "") + message->GetDescriptor()->field(f)->name();
      }
      throw UsageError(str("--set ", key, ": unknown field '", parts[i], "' in ", message->GetDescriptor()->name(),
                           " (fields: ", known, ")"));
    }
    bool last = i + 1 == parts.size();
    if (!last) {
      if (field->type() != FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) {
        throw UsageError(str("--set ", key, ": '", parts[i], "' is not a message"));
      }
      message = message->GetReflection()->MutableMessage(message, field);
      continue;
    }
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      throw UsageError(str("--set ", key, ": '", parts[i], "' is a message; set one of its fields (", key, ".x=...)"));
    }
    std::vector<std::string> values;
    if (field->is_repeated()) {
      std::string list = value;
      if (!list.empty() && list.front() == '[') list = list.substr(1);
      if (!list.empty() && list.back() == ']') list.pop_back();
      std::stringstream items(list);
      while (std::getline(items, part, ',')) {
        if (!trim(part).empty()) values.push_back(trim(part));
      }
      message->GetReflection()->ClearField(message, field);
    } else {
      values.push_back(value);
    }
    for (std::string item : values) {
      if (field->type() == FieldDescriptor::TYPE_ENUM) {
        for (auto& ch : item) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        for (auto& ch : item) ch = ch == '-' ? '_' : ch;
      } else if (field->type() == FieldDescriptor::TYPE_STRING && (item.empty() || item.front() != '"')) {
        item = str('"', item, '"');
      }
      google::protobuf::TextFormat::Parser parser;
      CollectErrors quiet(key);  // our message below says it better than protobuf's log line
      parser.RecordErrorsTo(&quiet);
      if (!parser.ParseFieldValueFromString(item, field, message)) {
        std::string expected = field->type_name();
        if (field->type() == FieldDescriptor::TYPE_ENUM) {
          expected = "one of";
          for (int v = 0; v < field->enum_type()->value_count(); ++v) expected += " " + field->enum_type()->value(v)->name();
        }
        throw UsageError(str("--set ", key, ": expected ", expected, ", got '", value, "'"));
      }
    }
  }
}

void validate_model_config(const pb::ModelConfig& c) {
  auto need = [&](bool ok, const std::string& message) {
    if (!ok) throw UsageError(str("model config ", c.name().empty() ? "" : str("'", c.name(), "' "), message));
  };
  need(c.vocab_size() > 5, str("expected vocab_size > 5, got ", c.vocab_size()));
  need(c.embedding_size() > 0 && c.hidden_size() > 0 && c.num_layers() > 0 && c.num_heads() > 0 &&
           c.intermediate_size() > 0 && c.max_length() > 0,
       "expected positive embedding_size, hidden_size, num_layers, num_heads, intermediate_size, max_length");
  need(c.hidden_size() % c.num_heads() == 0,
       str("expected hidden_size divisible by num_heads, got ", c.hidden_size(), " and ", c.num_heads()));
  need(c.dropout() >= 0 && c.dropout() < 1 && c.attention_dropout() >= 0 && c.attention_dropout() < 1,
       "expected dropout and attention_dropout in [0, 1)");
  const auto& a = c.attention();
  if (a.relative_fixed() || a.relative_dynamic() || a.relative_key() || a.depthwise_values() || a.conv_query() ||
      a.conv_key() || a.conv_value()) {
    need(a.relative_radius() > 0, str("expected attention.relative_radius > 0, got ", a.relative_radius()));
  }
  if ((a.conv_query() || a.conv_key() || a.conv_value()) && c.family() == pb::BERT) {
    need(c.num_heads() >= 2, "expected at least 2 heads for convolutional queries/keys/values (half the heads)");
  }
  if (c.family() == pb::CONVBERT) {
    const auto& cb = c.convbert();
    need(cb.head_ratio() >= 1, str("expected convbert.head_ratio >= 1, got ", cb.head_ratio()));
    need(cb.conv_kernel_size() >= 1, str("expected convbert.conv_kernel_size >= 1, got ", cb.conv_kernel_size()));
    need(cb.ffn_groups() >= 1 && c.hidden_size() % cb.ffn_groups() == 0 && c.intermediate_size() % cb.ffn_groups() == 0,
         str("expected convbert.ffn_groups dividing hidden_size and intermediate_size, got ", cb.ffn_groups()));
  }
  if (c.family() == pb::LIGHTCONV || c.family() == pb::DYNAMICCONV) {
    const auto& b = c.conv_block();
    need(b.kernel_sizes_size() > 0, "expected at least one conv_block.kernel_sizes entry");
    for (int k : b.kernel_sizes()) need(k >= 1, str("expected conv_block.kernel_sizes >= 1, got ", k));
    int heads = b.conv_heads() > 0 ? b.conv_heads() : c.num_heads();
    need(c.hidden_size() % heads == 0, str("expected hidden_size divisible by conv heads ", heads));
    need(b.weight_dropout() >= 0 && b.weight_dropout() < 1, "expected conv_block.weight_dropout in [0, 1)");
  }
}

pb::ModelConfig load_model_config(const std::string& preset_or_path, const std::vector<std::string>& set_overrides) {
  pb::ModelConfig config;
  bool is_preset = false;
  for (const auto& name : preset_names()) is_preset = is_preset || name == preset_or_path;
  if (is_preset) {
    config = preset_config(preset_or_path);
  } else if (preset_or_path.find(".textproto") != std::string::npos || std::ifstream(preset_or_path).good()) {
    std::string text = read_file(preset_or_path);
    google::protobuf::TextFormat::Parser parser;
    CollectErrors errors(preset_or_path);
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(text, &config)) {
      throw UsageError(str(errors.first().empty() ? preset_or_path + ": cannot parse the model config" : errors.first()));
    }
  } else {
    preset_config(preset_or_path);  // throws the unknown-preset message
  }
  for (const auto& assignment : set_overrides) apply_override(&config, assignment);
  validate_model_config(config);
  return config;
}

std::string config_to_text(const pb::ModelConfig& config) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetPrintMessageFieldsInIndexOrder(true);
  std::string out;
  printer.PrintToString(config, &out);
  return out;
}

}  // namespace cabert::models
