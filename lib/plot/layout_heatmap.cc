// Heatmap layout: tick labels (given or numeric) decide the margins; x labels turn diagonal or vertical
// and are thinned out when they do not fit side by side; cell edges are whole pixels.
#include <algorithm>
#include <cmath>

#include "lib/plot/layout.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

constexpr double kMaxLabelWidth = 110;  // longer labels are ellipsized (less in small panels)
constexpr double kSin45 = 0.70710678118654752;

// One axis of a heatmap: its labels (given, or the numbers start, start + 1, ...) and which are shown.
struct AxisLabels {
  std::vector<std::string> given;  // ellipsized; empty for numeric labels
  int64_t count = 0;
  double start = 0;

  bool numeric() const { return given.empty(); }
  std::string label(int64_t index) const {
    if (!numeric()) return given[index];
    double value = start + static_cast<double>(index);
    return start == std::floor(start) ? format_tick(value, 1) : format_number(value, 6);
  }
  // Widest label (numbers are widest at the ends of the range).
  double max_width(cairo_t* cr) const {
    double width = 0;
    if (numeric()) {
      for (int64_t index : {int64_t{0}, count - 1}) width = std::max(width, text_width(cr, Font::kTick, label(index)));
    }
    for (const std::string& text : given) width = std::max(width, text_width(cr, Font::kTick, text));
    return width;
  }
  // The indices that get a tick when a cell is `cell_px` long and labels need `need_px` each: every
  // label, every k-th label, or numbers at multiples of a nice step.
  std::vector<int64_t> shown(double cell_px, double need_px) const {
    int64_t step = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(need_px / cell_px - 1e-9)));
    int64_t first = 0;
    if (numeric()) {
      step = std::llround(nice_step(static_cast<double>(step)));
      if (start == std::floor(start)) first = ((-static_cast<int64_t>(start)) % step + step) % step;
    }
    std::vector<int64_t> indices;
    for (int64_t index = first; index < count; index += step) indices.push_back(index);
    return indices;
  }
};

AxisLabels axis_labels(cairo_t* cr, const std::vector<std::string>& given, int64_t count, double start,
                       double max_width) {
  AxisLabels labels;
  labels.count = count;
  labels.start = start;
  for (const std::string& text : given) labels.given.push_back(ellipsize(cr, Font::kTick, text, max_width));
  return labels;
}

std::vector<int> edges(double origin, double length, int64_t count) {
  std::vector<int> result(count + 1);
  for (int64_t i = 0; i <= count; ++i) {
    result[i] = static_cast<int>(origin + std::llround(static_cast<double>(i) * length / static_cast<double>(count)));
  }
  return result;
}

std::vector<Tick> ticks_at(const AxisLabels& labels, const std::vector<int64_t>& indices,
                           const std::vector<int>& edges) {
  std::vector<Tick> ticks;
  for (int64_t index : indices) ticks.push_back({(edges[index] + edges[index + 1]) / 2.0, labels.label(index)});
  return ticks;
}

// How far a diagonal label (anchored at its right end, rotated by -45 degrees) reaches left of and below
// its anchor.
double diagonal_extent(double width, double line) { return kSin45 * (width + line / 2); }

void layout_colour_bar(cairo_t* cr, double right, PanelLayout* layout, double* plot_right) {
  const ColourScale& colours = layout->colours;
  // Top to bottom; a single value (constant data) gets one label in the middle. Until the bar is placed,
  // a tick's position holds its slot: 0 top, 1 middle, 2 bottom.
  std::vector<double> values = {colours.hi, (colours.lo + colours.hi) / 2, colours.lo};
  double label_width = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (colours.lo == colours.hi && i != 1) continue;
    layout->colour_bar_ticks.push_back({static_cast<double>(i), format_number(values[i], 3)});
    label_width = std::max(label_width, text_width(cr, Font::kTick, layout->colour_bar_ticks.back().label));
  }
  *plot_right = right - (kColourBarGap + kColourBarWidth + kTickLength + kTickGap + label_width);
}

}  // namespace

void layout_heatmap(cairo_t* cr, const Heatmap& heatmap, Rect frame, PanelLayout* layout) {
  double line = line_height(cr, Font::kTick);
  layout->colours = colour_scale(heatmap);
  double plot_right = frame.x + frame.width;
  if (heatmap.colour_bar) layout_colour_bar(cr, plot_right, layout, &plot_right);

  AxisLabels rows = axis_labels(cr, heatmap.row_labels, heatmap.rows, heatmap.row_start,
                                std::min(kMaxLabelWidth, 0.3 * layout->cell.width));
  // Column labels may stand on end: capped by the cell's height.
  AxisLabels cols = axis_labels(cr, heatmap.col_labels, heatmap.cols, heatmap.col_start,
                                std::min(kMaxLabelWidth, 0.25 * layout->cell.height));
  double x0 = std::ceil(frame.x + rows.max_width(cr) + kTickLength + kTickGap);
  double col_label_width = cols.max_width(cr);

  // Choose how the column labels stand; diagonal ones may reach left past the cell edge, which moves
  // the plot area right (and makes cells narrower, so the choice is made again).
  std::vector<int64_t> shown;
  double width = 1;
  for (int attempt = 0; attempt < 6; ++attempt) {
    width = std::max(1.0, std::floor(plot_right - x0));
    double cell = width / static_cast<double>(heatmap.cols);
    if (cols.numeric()) {
      layout->x_angle = LabelAngle::kHorizontal;
      shown = cols.shown(cell, col_label_width + 10);
    } else if (col_label_width + 6 <= cell) {
      layout->x_angle = LabelAngle::kHorizontal;
      shown = cols.shown(cell, 1);
    } else if (1.5 * line <= cell) {
      layout->x_angle = LabelAngle::kDiagonal;
      shown = cols.shown(cell, 1);
    } else {
      layout->x_angle = LabelAngle::kVertical;
      shown = cols.shown(cell, line + 2);
    }
    if (layout->x_angle != LabelAngle::kDiagonal) break;
    double overhang = 0;
    for (int64_t index : shown) {
      double centre = x0 + (static_cast<double>(index) + 0.5) * cell;
      double reach = diagonal_extent(text_width(cr, Font::kTick, cols.label(index)), line);
      overhang = std::max(overhang, layout->cell.x + 2 - (centre - reach));
    }
    if (overhang <= 0) break;
    x0 += std::ceil(overhang);
  }
  width = std::max(1.0, std::floor(plot_right - x0));  // in case the last attempt moved x0

  double label_band = layout->x_angle == LabelAngle::kHorizontal ? line
                      : layout->x_angle == LabelAngle::kDiagonal ? diagonal_extent(col_label_width, line)
                                                                 : col_label_width;
  double y0 = std::ceil(frame.y);
  double height = std::max(1.0, std::floor(frame.y + frame.height - kTickLength - kTickGap - label_band - y0));
  layout->plot = {x0, y0, width, height};
  layout->col_edges = edges(x0, width, heatmap.cols);
  layout->row_edges = edges(y0, height, heatmap.rows);
  layout->x_ticks = ticks_at(cols, shown, layout->col_edges);
  double row_cell = height / static_cast<double>(heatmap.rows);
  layout->y_ticks = ticks_at(rows, rows.shown(row_cell, rows.numeric() ? line + 4 : line + 1), layout->row_edges);

  if (heatmap.colour_bar) {
    layout->colour_bar = {x0 + width + kColourBarGap, y0, kColourBarWidth, height};
    for (Tick& tick : layout->colour_bar_ticks) tick.position = y0 + height * tick.position / 2;
  }
}

}  // namespace cabert::plot
