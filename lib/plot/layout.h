// Where everything of a panel goes, computed once and shared by the drawing code and the geometry
// functions of figure.h (so that plot_area() and chart_point() match the pixels exactly). Text is
// measured on a Cairo context because label sizes decide the margins.
//
// A panel cell, top to bottom: padding, panel title, (half a tick label), the plot area with its frame,
// tick marks and tick labels, the x axis title, padding. Left to right: padding, the rotated y axis
// title, y tick labels and marks, the plot area, a heatmap's colour bar, padding.
#pragma once

#include <cairo.h>

#include <string>
#include <vector>

#include "lib/plot/colour_map.h"
#include "lib/plot/figure.h"
#include "lib/plot/ticks.h"

namespace cabert::plot {

inline constexpr double kPadding = 10;    // around a panel's contents
inline constexpr double kTickLength = 5;  // tick marks point outwards from the frame
inline constexpr double kTickGap = 3;     // between a tick mark and its label
inline constexpr double kColourBarGap = 14, kColourBarWidth = 14;

struct Tick {
  double position = 0;  // pixel x on an x axis, pixel y on a y axis
  std::string label;
};
// x tick labels of a heatmap turn when they do not fit side by side.
enum class LabelAngle { kHorizontal, kDiagonal, kVertical };

struct PanelLayout {
  Rect cell;             // the panel's grid cell
  Rect plot;             // the data rectangle (integer coordinates), inside the frame
  double title_y = 0;    // top of the panel title
  double x_title_y = 0;  // top of the x axis title
  double y_title_x = 0;  // left edge of the (rotated) y axis title
  std::vector<Tick> x_ticks, y_ticks;
  LabelAngle x_angle = LabelAngle::kHorizontal;
  // Line charts.
  AxisScale x_scale, y_scale;
  // Heatmaps: cell boundaries in pixels (cols + 1 and rows + 1 of them), the colour range and bar.
  std::vector<int> col_edges, row_edges;
  ColourScale colours;
  Rect colour_bar;  // width 0 when there is none
  std::vector<Tick> colour_bar_ticks;
};

// "" when the figure can be drawn, else what is wrong ("panel 0 (heatmap): expected 12 values ...").
std::string figure_problem(const Figure& figure);
Rect panel_cell(const Figure& figure, size_t panel);
// The panel must exist and the figure be valid.
PanelLayout layout_panel(cairo_t* measure, const Figure& figure, size_t panel);

// The parts, for layout.cc. `frame` arrives holding the space that is left for the plot area and its tick
// labels once the titles are placed.
void layout_heatmap(cairo_t* measure, const Heatmap& heatmap, Rect frame, PanelLayout* layout);
void layout_line_chart(cairo_t* measure, const LineChart& chart, Rect frame, PanelLayout* layout);

// Pixel position of a data point in a laid-out line chart.
Point chart_pixel(const PanelLayout& layout, double x, double y);

}  // namespace cabert::plot
