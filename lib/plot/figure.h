// PNG figures for papers and reports: heatmaps (attention maps, convolution kernels, confusion matrices)
// and line charts (training curves), laid out in a grid of panels. Drawn with Cairo; no torch here, so
// callers convert tensors to plain vectors first.
//
//   +---------------- figure title (band of kFigureTitleBand px, only when the title is non-empty) ---+
//   | panel 0 cell (panel_width x panel_height) | panel 1 cell | ...   `columns` cells a row,          |
//   | panel title, axes, ticks, colour bar      |              |       rows filled in order            |
//   +------------------------------------------------------------------------------------------------+
//
// Heatmap cells are exact, integer-aligned, unantialiased rectangles: the pixel that holds
// heatmap_cell_centre() has exactly heatmap_colour(value). A matrix with more rows or columns than the
// panel has pixels is subsampled (each pixel shows the cell it falls in; some cells get none).
// Line chart axes span the data with 5% padding, rounded outwards to half a tick step (log axes: the
// padded range in decades); chart_point() uses the very ranges that are drawn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cabert::plot {

struct Heatmap {
  int64_t rows = 0, cols = 0;
  std::vector<double> values;                       // row-major rows x cols; NaN = blank (light grey)
  std::vector<std::string> row_labels, col_labels;  // one tick label per row/column; empty = numeric ticks
  double row_start = 0, col_start = 0;              // the number of row 0 / column 0 for numeric ticks
  std::string x_label, y_label;                     // columns run along x, rows along y, row 0 at the top
  // Sequential: viridis from min to max. Diverging: blue-white-red over -a..a, a = the largest |value|
  // (or the largest of |min|, |max| when given), so that 0 is always white.
  enum class Scale { kSequential, kDiverging } scale = Scale::kSequential;
  std::optional<double> min, max;  // a fixed colour range (e.g. 0..1 for probabilities); values beyond clamp
  bool colour_bar = true;          // a colour bar with min, mid and max labels right of the cells
};

struct Series {
  std::string label;
  std::vector<double> x, y;  // a non-finite x or y is a gap in the line
};

struct LineChart {
  std::vector<Series> series;  // coloured from a qualitative palette; a legend when >1 series or a label
  std::string x_label, y_label;
  bool log_y = false;    // log10 y axis; non-positive values are gaps
  bool markers = false;  // a dot at every point (isolated points always get one)
};

struct Panel {
  std::string title;
  std::variant<Heatmap, LineChart> content;
};

struct Figure {
  std::string title;  // drawn at the top in a larger font
  std::vector<Panel> panels;
  int columns = 1;  // cells a row; a figure with fewer panels than columns is only as wide as its panels
  int panel_width = 520, panel_height = 400;  // one grid cell, including its titles, axes and colour bar
};

// Height of the band that holds a non-empty figure title.
inline constexpr int kFigureTitleBand = 40;

struct Size {
  int width = 0, height = 0;
};
// min(columns, panels) * panel_width  x  ceil(panels / columns) * panel_height (+ kFigureTitleBand).
Size figure_size(const Figure& figure);

// Writes an opaque RGB PNG atomically (temporary file, then rename). Throws cabert::Error whose message
// begins with the path when the figure is invalid (e.g. "out.png: panel 0 (heatmap): expected 12 values
// (3 rows x 4 columns), got 11") or Cairo fails.
void write_png(const Figure& figure, const std::string& path);

// Geometry in pixels of the written PNG, for tests and for callers that annotate. They throw
// cabert::Error ("invalid figure: ...") for an invalid figure, a panel index out of range or a panel of
// the other kind.
struct Rect {
  double x = 0, y = 0, width = 0, height = 0;
};
struct Point {
  double x = 0, y = 0;
};
// The data rectangle of a panel, inside the axes frame (integer coordinates).
Rect plot_area(const Figure& figure, size_t panel);
Point heatmap_cell_centre(const Figure& figure, size_t panel, int64_t row, int64_t col);
// Data -> pixel for a line chart panel (may lie outside plot_area for points beyond the axis ranges).
Point chart_point(const Figure& figure, size_t panel, double x, double y);

// The colour (0xRRGGBB) that a heatmap gives `value`, with its colour range resolved from its data.
uint32_t heatmap_colour(const Heatmap& heatmap, double value);

// A decoded PNG, composited onto white.
struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;     // 0xRRGGBB, row-major
  uint32_t at(int x, int y) const;  // throws cabert::Error outside the image
};
// Throws cabert::Error naming the file when it cannot be read or is not a PNG.
Image read_png(const std::string& path);

}  // namespace cabert::plot
