#include "lib/pictures/kernel_pictures.h"

#include <regex>

#include "lib/core/errors.h"

namespace cabert::pictures {

namespace {

// "encoder.stack." -> "encoder", "generator." -> "generator", "decoder." -> "decoder".
std::string group_name(const std::string& prefix) {
  std::string name = prefix.substr(0, prefix.find('.'));
  return name.empty() ? "encoder" : name;
}

std::string file_name(const std::string& group, const std::string& base) {
  return group == "encoder" ? base : group + "_" + base;
}

}  // namespace

plot::Figure kernel_grid(const std::vector<LayerKernel>& layers, const std::string& title, bool softmax) {
  plot::Figure figure;
  figure.title = title;
  figure.columns = grid_columns(layers.size());
  for (const auto& layer : layers) {
    torch::Tensor kernel = softmax ? torch::softmax(layer.kernel.to(torch::kFloat64), -1) : layer.kernel;
    plot::Heatmap heatmap = matrix_heatmap(kernel);
    heatmap.col_start = static_cast<double>(layer.first_offset);
    heatmap.x_label = "relative offset j - i";
    heatmap.y_label = "head";
    if (softmax) {
      heatmap.min = 0.0;
    } else {
      heatmap.scale = plot::Heatmap::Scale::kDiverging;
    }
    figure.panels.push_back({str("layer ", layer.layer), heatmap});
  }
  return figure;
}

std::vector<NamedFigure> kernel_figures(const pb::ModelConfig& config,
                                        const std::map<std::string, torch::Tensor>& tensors,
                                        const std::string& model_name) {
  // <group prefix>[layers.]<index>.<module>.<tensor>
  static const std::regex pattern(
      R"(^(.*?)(?:layers\.)?(\d+)\.(attention|conv)\.(relative_beta|depthwise_weight|weight)$)");
  struct Group {
    std::vector<LayerKernel> relative, depthwise, lightconv;
  };
  std::map<std::string, Group> groups;
  for (const auto& [name, tensor] : tensors) {
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) continue;
    const std::string group = group_name(m[1]);
    const int64_t layer = std::stoll(m[2]);
    const std::string kind = m[4];
    const int64_t K = tensor.dim() == 2 ? tensor.size(1) : 0;
    if (m[3] == "attention" && kind == "relative_beta") {
      groups[group].relative.push_back({layer, tensor, -(K / 2)});
    } else if (m[3] == "attention" && kind == "depthwise_weight") {
      const int64_t heads = config.num_heads();
      torch::Tensor per_head = tensor.view({heads, -1, K}).mean(1);
      auto scale = tensors.find(name.substr(0, name.size() - kind.size()) + "depthwise_scale");
      if (scale != tensors.end()) per_head = per_head * scale->second.unsqueeze(1);
      groups[group].depthwise.push_back({layer, per_head, -(K / 2)});
    } else if (m[3] == "conv" && kind == "weight") {
      const bool decoder = group == "decoder";
      const auto family = decoder ? config.seq2seq().decoder_family() : config.family();
      if (family != pb::LIGHTCONV) continue;  // dynamic kernels need a sentence; dilated ones are per channel
      groups[group].lightconv.push_back({layer, tensor, decoder ? -(K - 1) : -(K / 2)});
    }
  }
  std::vector<NamedFigure> figures;
  for (auto& [group, kernels] : groups) {
    for (auto* list : {&kernels.relative, &kernels.depthwise, &kernels.lightconv}) {
      std::sort(list->begin(), list->end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
    }
    const std::string where = group == "encoder" ? model_name : str(model_name, ", ", group);
    if (!kernels.relative.empty()) {
      figures.push_back({file_name(group, "relative_kernels.png"),
                         kernel_grid(kernels.relative, str(where, ": relative-position weights \u03b2_h"), false)});
      figures.push_back({file_name(group, "relative_kernels_softmax.png"),
                         kernel_grid(kernels.relative, str(where, ": softmax of \u03b2_h over offsets"), true)});
    }
    if (!kernels.depthwise.empty()) {
      figures.push_back(
          {file_name(group, "depthwise_value_kernels.png"),
           kernel_grid(kernels.depthwise, str(where, ": depthwise value kernels (head mean x s_h)"), false)});
    }
    if (!kernels.lightconv.empty()) {
      figures.push_back({file_name(group, "lightconv_kernels.png"),
                         kernel_grid(kernels.lightconv, str(where, ": lightweight conv weights"), false)});
      figures.push_back({file_name(group, "lightconv_kernels_softmax.png"),
                         kernel_grid(kernels.lightconv, str(where, ": lightweight conv kernels (softmax)"), true)});
    }
  }
  return figures;
}

}  // namespace cabert::pictures
