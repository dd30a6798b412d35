#include "lib/pictures/figures.h"

#include <algorithm>
#include <filesystem>

#include "lib/core/files.h"

namespace cabert::pictures {

plot::Heatmap matrix_heatmap(const torch::Tensor& matrix) {
  torch::Tensor m = matrix.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  plot::Heatmap heatmap;
  heatmap.rows = m.size(0);
  heatmap.cols = m.size(1);
  const double* data = m.data_ptr<double>();
  heatmap.values.assign(data, data + m.numel());
  return heatmap;
}

int grid_columns(size_t panels, int max_columns) {
  return static_cast<int>(std::clamp<size_t>(panels, 1, static_cast<size_t>(max_columns)));
}

std::vector<std::string> write_figures(const std::vector<NamedFigure>& figures, const std::string& dir) {
  create_output_directory(dir, "--pictures");
  std::vector<std::string> written;
  for (const auto& named : figures) {
    std::string path = (std::filesystem::path(dir) / named.file).string();
    plot::write_png(named.figure, path);
    written.push_back(path);
  }
  return written;
}

}  // namespace cabert::pictures
