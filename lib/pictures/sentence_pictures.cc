#include "lib/pictures/sentence_pictures.h"

#include <regex>

#include "lib/core/errors.h"
#include "lib/models/encoder.h"
#include "lib/models/mixer.h"
#include "lib/models/seq2seq_model.h"

namespace cabert::pictures {

namespace {

struct ProbedLayer {
  std::string group;  // "encoder", or "encoder top attention"
  int64_t layer = 0;
  std::shared_ptr<models::Mixer> mixer;
  models::MixerProbe probe;
};

// Every mixer of the encoder side, in layer order, with a probe attached.
std::vector<ProbedLayer> attach_probes(torch::nn::Module& model) {
  static const std::regex layer_pattern(R"((?:^|\.)layers\.(\d+)\.)");
  std::vector<ProbedLayer> layers;
  for (const auto& item : model.named_modules()) {
    auto mixer = std::dynamic_pointer_cast<models::Mixer>(item.value());
    if (!mixer || item.key().rfind("decoder", 0) == 0) continue;
    ProbedLayer probed;
    std::smatch m;
    if (std::regex_search(item.key(), m, layer_pattern)) {
      probed.group = "encoder";
      probed.layer = std::stoll(m[1]);
    } else {
      probed.group = "encoder top attention";
    }
    probed.mixer = mixer;
    layers.push_back(std::move(probed));
  }
  for (auto& layer : layers) layer.mixer->probe = &layer.probe;
  return layers;
}

std::string layer_title(const ProbedLayer& layer) {
  return layer.group == "encoder" ? str("layer ", layer.layer) : layer.group;
}

std::string layer_file(const std::string& base, const ProbedLayer& layer) {
  return layer.group == "encoder" ? str(base, "_layer", layer.layer, ".png") : base + "_top.png";
}

NamedFigure attention_maps(const ProbedLayer& layer, const std::vector<std::string>& labels,
                           const std::string& model_name) {
  torch::Tensor attention = layer.probe.attention[0];  // [heads, T, T]
  plot::Figure figure;
  figure.title = str(model_name, ": attention, ", layer_title(layer));
  figure.columns = grid_columns(attention.size(0));
  figure.panel_width = 560, figure.panel_height = 520;
  for (int64_t h = 0; h < attention.size(0); ++h) {
    plot::Heatmap heatmap = matrix_heatmap(attention[h]);
    heatmap.row_labels = labels, heatmap.col_labels = labels;
    heatmap.x_label = "key", heatmap.y_label = "query";
    heatmap.min = 0.0;
    figure.panels.push_back({str("head ", h), heatmap});
  }
  return {layer_file("attention", layer), figure};
}

NamedFigure conv_kernel_maps(const ProbedLayer& layer, const std::vector<std::string>& labels,
                             const std::string& model_name) {
  torch::Tensor kernels = layer.probe.conv_kernels[0];  // [T, heads, K]
  const int64_t K = kernels.size(2);
  plot::Figure figure;
  figure.title = str(model_name, ": conv kernels, ", layer_title(layer));
  figure.columns = grid_columns(kernels.size(1));
  figure.panel_height = 520;
  for (int64_t h = 0; h < kernels.size(1); ++h) {
    plot::Heatmap heatmap = matrix_heatmap(kernels.select(1, h));
    heatmap.row_labels = labels;
    heatmap.col_start = static_cast<double>(-(K / 2));
    heatmap.x_label = "offset j - i", heatmap.y_label = "position";
    heatmap.min = 0.0;
    figure.panels.push_back({str("conv head ", h), heatmap});
  }
  return {layer_file("conv_kernels", layer), figure};
}

NamedFigure offset_profile(const std::vector<const ProbedLayer*>& layers, int64_t max_offset,
                           const std::string& model_name) {
  plot::Figure figure;
  figure.title = str(model_name, ": mean attention by relative offset");
  figure.columns = grid_columns(layers.size());
  for (const ProbedLayer* layer : layers) {
    torch::Tensor profile = attention_by_offset(layer->probe.attention[0], max_offset).to(torch::kFloat64);
    const int64_t D = (profile.size(1) - 1) / 2;
    plot::LineChart chart;
    chart.x_label = "offset j - i", chart.y_label = "mean attention";
    chart.markers = true;
    for (int64_t h = 0; h < profile.size(0); ++h) {
      plot::Series series;
      series.label = str("head ", h);
      for (int64_t d = -D; d <= D; ++d) {
        series.x.push_back(static_cast<double>(d));
        series.y.push_back(profile[h][d + D].item<double>());
      }
      chart.series.push_back(std::move(series));
    }
    figure.panels.push_back({layer_title(*layer), chart});
  }
  return {"attention_by_offset.png", figure};
}

}  // namespace

std::vector<std::string> token_labels(const text::Tokenizer& tokenizer, const std::vector<int>& ids) {
  static const std::string word_start = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  std::vector<std::string> labels;
  for (int id : ids) {
    std::string piece = tokenizer.id_to_piece(id);
    if (id < text::SpecialTokens::kFirstSentinel) {
      labels.push_back(piece);
    } else if (piece.rfind(word_start, 0) == 0) {
      labels.push_back(piece.size() > word_start.size() ? piece.substr(word_start.size()) : "_");
    } else {
      labels.push_back("##" + piece);
    }
  }
  return labels;
}

torch::Tensor attention_by_offset(const torch::Tensor& attention, int64_t max_offset) {
  const int64_t T = attention.size(-1), D = std::min(max_offset, T - 1);
  torch::Tensor out = torch::zeros({attention.size(0), 2 * D + 1}, attention.options());
  for (int64_t d = -D; d <= D; ++d) {
    // The diagonal j = i + d of every head's [T, T] map.
    out.select(1, d + D).copy_(attention.diagonal(d, -2, -1).mean(-1));
  }
  return out;
}

std::vector<NamedFigure> sentence_figures(const io::Checkpoint& checkpoint, const text::Tokenizer& tokenizer,
                                          const std::string& sentence, const std::string& model_name,
                                          int64_t max_tokens, int64_t max_offset) {
  const pb::ModelConfig& config = checkpoint.info.model();
  const bool seq2seq = config.has_seq2seq();
  std::vector<int> ids = tokenizer.encode(sentence);
  const int64_t room = std::min<int64_t>(max_tokens, config.max_length()) - (seq2seq ? 1 : 2);
  if (room <= 0) throw UsageError("--max-tokens leaves no room for the sentence");
  if (static_cast<int64_t>(ids.size()) > room) ids.resize(room);
  if (ids.empty()) throw UsageError(str("--sentence '", sentence, "' has no tokens"));
  if (!seq2seq) ids.insert(ids.begin(), text::SpecialTokens::kCls);
  ids.push_back(text::SpecialTokens::kSep);
  const std::vector<std::string> labels = token_labels(tokenizer, ids);

  torch::NoGradGuard no_grad;
  torch::Tensor input = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).unsqueeze(0);
  torch::Tensor mask = torch::ones_like(input, torch::kBool);
  std::vector<ProbedLayer> layers;  // holds the mixers (and their probes) after the model goes
  if (seq2seq) {
    models::Seq2SeqModel s2s(config);
    io::restore_module(*s2s, checkpoint);
    s2s->eval();
    layers = attach_probes(*s2s);
    s2s->encode(input, mask);
  } else {
    models::Encoder encoder(config);
    io::restore_module(*encoder, checkpoint, "model/encoder.", "");
    encoder->eval();
    layers = attach_probes(*encoder);
    encoder->forward(input, torch::zeros_like(input), mask);
  }
  std::vector<NamedFigure> figures;
  std::vector<const ProbedLayer*> attending;
  for (auto& layer : layers) {
    layer.mixer->probe = nullptr;
    if (layer.probe.attention.defined()) {
      figures.push_back(attention_maps(layer, labels, model_name));
      attending.push_back(&layer);
    }
    if (layer.probe.conv_kernels.defined()) figures.push_back(conv_kernel_maps(layer, labels, model_name));
  }
  if (!attending.empty()) figures.push_back(offset_profile(attending, max_offset, model_name));
  return figures;
}

}  // namespace cabert::pictures
