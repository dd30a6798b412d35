#include "lib/plot/layout.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/core/errors.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

constexpr int kMinPanelWidth = 160, kMinPanelHeight = 120;
constexpr int kMaxPixels = 32767;  // Cairo's limit for an image surface side
constexpr int64_t kMaxCells = int64_t{1} << 30;

std::string heatmap_problem(const Heatmap& heatmap) {
  if (heatmap.rows < 1 || heatmap.cols < 1 || heatmap.rows > kMaxCells || heatmap.cols > kMaxCells) {
    return str("expected 1 to ", kMaxCells, " rows and columns, got ", heatmap.rows, " x ", heatmap.cols);
  }
  int64_t count = heatmap.rows * heatmap.cols;
  if (static_cast<int64_t>(heatmap.values.size()) != count) {
    return str("expected ", count, " values (", heatmap.rows, " rows x ", heatmap.cols, " columns), got ",
               heatmap.values.size());
  }
  if (!heatmap.row_labels.empty() && static_cast<int64_t>(heatmap.row_labels.size()) != heatmap.rows) {
    return str("expected ", heatmap.rows, " row labels (one per row) or none, got ", heatmap.row_labels.size());
  }
  if (!heatmap.col_labels.empty() && static_cast<int64_t>(heatmap.col_labels.size()) != heatmap.cols) {
    return str("expected ", heatmap.cols, " column labels (one per column) or none, got ", heatmap.col_labels.size());
  }
  if (heatmap.min && !std::isfinite(*heatmap.min)) return str("expected a finite min, got ", *heatmap.min);
  if (heatmap.max && !std::isfinite(*heatmap.max)) return str("expected a finite max, got ", *heatmap.max);
  if (heatmap.min && heatmap.max && !(*heatmap.min < *heatmap.max)) {
    return str("expected min < max, got min ", *heatmap.min, " and max ", *heatmap.max);
  }
  return "";
}

std::string line_chart_problem(const LineChart& chart) {
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& series = chart.series[i];
    if (series.x.size() != series.y.size()) {
      return str("series ", i, " \"", series.label, "\": expected as many y values as x values (", series.x.size(),
                 "), got ", series.y.size());
    }
  }
  return "";
}

}  // namespace

std::string figure_problem(const Figure& figure) {
  if (figure.panels.empty()) return "expected at least one panel, got none";
  if (figure.columns < 1) return str("expected columns >= 1, got ", figure.columns);
  if (figure.panel_width < kMinPanelWidth || figure.panel_height < kMinPanelHeight) {
    return str("expected panels of at least ", kMinPanelWidth, " x ", kMinPanelHeight, " pixels, got ",
               figure.panel_width, " x ", figure.panel_height);
  }
  // In 64 bits: a figure too large for int must not overflow on the way to the message.
  int64_t columns = std::min<int64_t>(figure.columns, figure.panels.size());
  int64_t rows = (static_cast<int64_t>(figure.panels.size()) + columns - 1) / columns;
  int64_t width = columns * figure.panel_width;
  int64_t height = rows * figure.panel_height + (figure.title.empty() ? 0 : kFigureTitleBand);
  if (width > kMaxPixels || height > kMaxPixels) {
    return str("expected a figure of at most ", kMaxPixels, " x ", kMaxPixels, " pixels, got ", width, " x ", height);
  }
  for (size_t i = 0; i < figure.panels.size(); ++i) {
    const auto& content = figure.panels[i].content;
    if (const auto* heatmap = std::get_if<Heatmap>(&content)) {
      std::string problem = heatmap_problem(*heatmap);
      if (!problem.empty()) return str("panel ", i, " (heatmap): ", problem);
    } else {
      std::string problem = line_chart_problem(std::get<LineChart>(content));
      if (!problem.empty()) return str("panel ", i, " (line chart): ", problem);
    }
  }
  return "";
}

Size figure_size(const Figure& figure) {
  if (figure.panels.empty() || figure.columns < 1) return {};
  int columns = static_cast<int>(std::min<size_t>(figure.columns, figure.panels.size()));
  int rows = static_cast<int>((figure.panels.size() + columns - 1) / columns);
  int title = figure.title.empty() ? 0 : kFigureTitleBand;
  return {columns * figure.panel_width, rows * figure.panel_height + title};
}

Rect panel_cell(const Figure& figure, size_t panel) {
  size_t columns = std::min<size_t>(figure.columns, figure.panels.size());
  double top = figure.title.empty() ? 0 : kFigureTitleBand;
  return {static_cast<double>(panel % columns) * figure.panel_width,
          top + static_cast<double>(panel / columns) * figure.panel_height, static_cast<double>(figure.panel_width),
          static_cast<double>(figure.panel_height)};
}

PanelLayout layout_panel(cairo_t* measure, const Figure& figure, size_t panel) {
  const Panel& content = figure.panels.at(panel);
  PanelLayout layout;
  layout.cell = panel_cell(figure, panel);
  const Heatmap* heatmap = std::get_if<Heatmap>(&content.content);
  const LineChart* chart = std::get_if<LineChart>(&content.content);
  const std::string& x_label = heatmap ? heatmap->x_label : chart->x_label;
  const std::string& y_label = heatmap ? heatmap->y_label : chart->y_label;

  double left = layout.cell.x + kPadding, right = layout.cell.x + layout.cell.width - kPadding;
  double top = layout.cell.y + kPadding, bottom = layout.cell.y + layout.cell.height - kPadding;
  layout.title_y = top;
  if (!content.title.empty()) top += line_height(measure, Font::kPanelTitle) + 8;
  top += line_height(measure, Font::kTick) / 2;  // the top y tick label is centred on the frame's edge
  double axis_title = line_height(measure, Font::kAxisTitle);
  if (!x_label.empty()) {
    layout.x_title_y = bottom - axis_title;
    bottom = layout.x_title_y - 6;
  }
  if (!y_label.empty()) {
    layout.y_title_x = left;
    left += axis_title + 6;
  }
  Rect frame{left, top, right - left, bottom - top};
  if (heatmap) {
    layout_heatmap(measure, *heatmap, frame, &layout);
  } else {
    layout_line_chart(measure, *chart, frame, &layout);
  }
  return layout;
}

Point chart_pixel(const PanelLayout& layout, double x, double y) {
  const Rect& plot = layout.plot;
  return {plot.x + layout.x_scale.fraction(x) * plot.width,
          plot.y + plot.height - layout.y_scale.fraction(y) * plot.height};
}

}  // namespace cabert::plot
