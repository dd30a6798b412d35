#include "lib/interop/hf_layout.h"

#include "lib/core/errors.h"
#include "lib/models/pretraining_models.h"

namespace cabert::interop {

namespace {

bool only_absolute_positions(const pb::AttentionConfig& a) {
  return a.absolute_positions() && !a.relative_fixed() && !a.relative_dynamic() && !a.relative_key() &&
         !a.depthwise_values() && !a.conv_query() && !a.conv_key() && !a.conv_value();
}

// Why HF's ConvBERT cannot compute this ConvBERT ("" when it can).
std::string convbert_mismatch(const pb::ModelConfig& c) {
  const auto& cb = c.convbert();
  if (cb.conv_kind() != pb::SDCONV) return "HF's ConvBERT has only the span-based dynamic convolution";
  if (!cb.bottleneck()) return "HF's ConvBERT always uses the bottleneck attention";
  if (cb.conv_kernel_size() % 2 == 0) {
    return "HF's ConvBERT pads even kernels asymmetrically wrong (its outputs lose a position)";
  }
  const int64_t H = c.hidden_size(), N = c.num_heads();
  const int64_t hf_heads = std::max<int64_t>(1, N / std::max(1, cb.head_ratio()));
  if (H % hf_heads != 0 || (H / hf_heads) / 2 != H / N) {
    return str("HF's ConvBERT head size (H / (N / ratio)) / 2 = ", (H / hf_heads) / 2,
               " differs from cabert's H / N = ", H / N, " (only head_ratio 2 agrees)");
  }
  const int groups = std::max(1, cb.ffn_groups());
  if (c.hidden_size() % groups || c.intermediate_size() % groups) return "FFN groups do not divide the sizes";
  return "";
}

void add_linear(std::vector<TensorLink>& links, const std::string& cabert, const std::string& hf) {
  links.push_back({cabert + ".weight", hf + ".weight"});
  links.push_back({cabert + ".bias", hf + ".bias"});
}

void add_embeddings(std::vector<TensorLink>& links, const std::string& from, const std::string& hf) {
  links.push_back({from + "token.weight", hf + "embeddings.word_embeddings.weight"});
  links.push_back({from + "position.weight", hf + "embeddings.position_embeddings.weight"});
  links.push_back({from + "segment.weight", hf + "embeddings.token_type_embeddings.weight"});
  add_linear(links, from + "norm", hf + "embeddings.LayerNorm");
}

// The stack (projection + layers) of `config` under cabert's `from` ("encoder.stack.", "generator.").
void add_stack(std::vector<TensorLink>& links, const pb::ModelConfig& config, HfFamily family, const std::string& from,
               const std::string& hf) {
  if (config.embedding_size() != config.hidden_size()) {
    add_linear(links, from + "embedding_projection", hf + "embeddings_project");
  }
  const bool grouped = family == HfFamily::kConvBert && config.convbert().ffn_groups() > 1;
  for (int i = 0; i < config.num_layers(); ++i) {
    const std::string c = str(from, "layers.", i, "."), h = str(hf, "encoder.layer.", i, ".");
    for (const char* projection : {"query", "key", "value"}) {
      add_linear(links, c + "attention." + projection, h + "attention.self." + projection);
    }
    if (family == HfFamily::kConvBert) {
      const std::string conv = h + "attention.self.key_conv_attn_layer.";
      links.push_back({c + "attention.key_conv.depthwise_weight", conv + "depthwise.weight", Reshape::kDepthwise});
      links.push_back({c + "attention.key_conv.pointwise.weight", conv + "pointwise.weight", Reshape::kPointwise});
      links.push_back({c + "attention.key_conv.pointwise.bias", conv + "bias", Reshape::kColumn});
      add_linear(links, c + "attention.conv_kernel", h + "attention.self.conv_kernel_layer");
      add_linear(links, c + "attention.conv_value", h + "attention.self.conv_out_layer");
    }
    add_linear(links, c + "output", h + "attention.output.dense");
    add_linear(links, c + "attention_norm", h + "attention.output.LayerNorm");
    add_linear(links, c + (grouped ? "ffn.grouped_in" : "ffn.in"), h + "intermediate.dense");
    add_linear(links, c + (grouped ? "ffn.grouped_out" : "ffn.out"), h + "output.dense");
    add_linear(links, c + "ffn_norm", h + "output.LayerNorm");
  }
}

void add_mlm_head(std::vector<TensorLink>& links, HfFamily family, const std::string& from) {
  if (family == HfFamily::kBert) {
    add_linear(links, from + "transform", "cls.predictions.transform.dense");
    add_linear(links, from + "norm", "cls.predictions.transform.LayerNorm");
    links.push_back({from + "bias", "cls.predictions.bias"});
  } else {
    add_linear(links, from + "transform", "generator_predictions.dense");
    add_linear(links, from + "norm", "generator_predictions.LayerNorm");
    links.push_back({from + "bias", "generator_lm_head.bias"});
  }
}

}  // namespace

const char* model_head_name(ModelHead head) {
  switch (head) {
    case ModelHead::kEncoder: return "encoder";
    case ModelHead::kMlm: return "mlm";
    case ModelHead::kElectra: return "electra";
    case ModelHead::kClassification: return "classification";
    case ModelHead::kSpan: return "span";
  }
  return "?";
}

torch::Tensor to_hf_layout(const torch::Tensor& t, Reshape reshape) {
  switch (reshape) {
    case Reshape::kDepthwise: return t.unsqueeze(1);
    case Reshape::kPointwise:
    case Reshape::kColumn: return t.unsqueeze(-1);
    default: return t;
  }
}

torch::Tensor from_hf_layout(const torch::Tensor& t, Reshape reshape) {
  switch (reshape) {
    case Reshape::kDepthwise: return t.squeeze(1);
    case Reshape::kPointwise:
    case Reshape::kColumn: return t.squeeze(-1);
    default: return t;
  }
}

std::vector<int64_t> hf_shape(std::vector<int64_t> shape, Reshape reshape) {
  if (reshape == Reshape::kDepthwise) shape.insert(shape.begin() + 1, 1);
  if (reshape == Reshape::kPointwise || reshape == Reshape::kColumn) shape.push_back(1);
  return shape;
}

HfTarget hf_target(const pb::ModelConfig& config, ModelHead head) {
  if (config.has_seq2seq()) {
    return {HfFamily::kNone, "transformers has no class for cabert's encoder-decoders (Wu et al.'s and Tay et al.'s "
                             "convolution blocks, its post-LN Transformer with tied embeddings)"};
  }
  if (config.normalize_mixer_output())
    return {HfFamily::kNone, "Tay et al.'s X + LN(Mix(X)) blocks exist only in cabert"};
  if (config.ffn_activation() != pb::GELU) {
    return {HfFamily::kNone, "the FFN activation is ReLU (ffn_activation RELU), and transformers' BERT, ELECTRA and "
                             "ConvBERT classes apply hidden_act in their heads too, where cabert's heads apply GELU"};
  }
  if (config.family() == pb::BERT) {
    if (!only_absolute_positions(config.attention())) {
      return {HfFamily::kNone, str("the attention variant '", config.attention().variant(),
                                   "' (relative / convolutional terms of Chang et al.) exists only in cabert")};
    }
    const bool electra = head == ModelHead::kElectra || config.embedding_size() != config.hidden_size();
    return {electra ? HfFamily::kElectra : HfFamily::kBert, ""};
  }
  if (config.family() == pb::CONVBERT) {
    if (!only_absolute_positions(config.attention())) {
      return {HfFamily::kNone, "HF's ConvBERT has absolute positions only"};
    }
    std::string mismatch = convbert_mismatch(config);
    if (!mismatch.empty()) return {HfFamily::kNone, mismatch};
    return {HfFamily::kConvBert, ""};
  }
  return {HfFamily::kNone, "Wu et al.'s and Tay et al.'s convolution blocks exist only in cabert"};
}

const char* hf_model_type(HfFamily family) {
  switch (family) {
    case HfFamily::kBert: return "bert";
    case HfFamily::kElectra: return "electra";
    case HfFamily::kConvBert: return "convbert";
    default: return "cabert";
  }
}

std::string hf_base_prefix(HfFamily family) { return std::string(hf_model_type(family)) + "."; }

std::string hf_architecture(HfFamily family, ModelHead head) {
  const std::string base = family == HfFamily::kBert ? "Bert" : family == HfFamily::kElectra ? "Electra" : "ConvBert";
  switch (head) {
    case ModelHead::kEncoder: return base + "Model";
    case ModelHead::kMlm: return base + "ForMaskedLM";
    case ModelHead::kElectra: return family == HfFamily::kElectra ? "ElectraForPreTraining" : base + "Model";
    case ModelHead::kClassification:
      return family == HfFamily::kBert ? "BertForSequenceClassification" : base + "Model";
    case ModelHead::kSpan: return base + "ForQuestionAnswering";
  }
  return base + "Model";
}

std::vector<TensorLink> hf_links(const pb::ModelConfig& config, HfFamily family, ModelHead head) {
  if (family == HfFamily::kNone) throw Error("hf_links: the model has no Hugging Face family");
  const std::string base = hf_base_prefix(family);
  std::vector<TensorLink> links;
  add_embeddings(links, "encoder.embeddings.", base);
  add_stack(links, config, family, "encoder.stack.", base);
  switch (head) {
    case ModelHead::kEncoder: break;
    case ModelHead::kMlm: add_mlm_head(links, family, "mlm_head."); break;
    case ModelHead::kElectra:
      // HF's ELECTRA discriminator head; ConvBertModel ignores these two (documented).
      add_linear(links, "discriminator_dense", "discriminator_predictions.dense");
      add_linear(links, "discriminator_out", "discriminator_predictions.dense_prediction");
      break;
    case ModelHead::kClassification:
      if (family == HfFamily::kBert) {
        add_linear(links, "head.1", "bert.pooler.dense");
        add_linear(links, "head.4", "classifier");
      } else {  // the names of HF's ...ClassificationHead (which applies GELU where cabert applies tanh)
        add_linear(links, "head.1", "classifier.dense");
        add_linear(links, "head.4", "classifier.out_proj");
      }
      break;
    case ModelHead::kSpan: add_linear(links, "head.0", "qa_outputs"); break;
  }
  return links;
}

std::vector<TensorLink> hf_generator_links(const pb::ModelConfig& config, HfFamily family) {
  const pb::ModelConfig g = models::generator_config(config);
  const std::string base = hf_base_prefix(family);
  std::vector<TensorLink> links;
  add_embeddings(links, "encoder.embeddings.", base);
  add_stack(links, g, family, "generator.", base);
  add_mlm_head(links, family, "generator_head.");
  return links;
}

}  // namespace cabert::interop
