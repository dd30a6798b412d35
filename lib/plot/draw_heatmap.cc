#include <algorithm>
#include <cmath>

#include "lib/plot/draw.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

// For each pixel offset from edges[0], the index of the cell it falls in.
std::vector<int64_t> cell_of_pixel(const std::vector<int>& edges) {
  std::vector<int64_t> cells;
  for (size_t cell = 0; cell + 1 < edges.size(); ++cell) {
    for (int pixel = edges[cell]; pixel < edges[cell + 1]; ++pixel) cells.push_back(static_cast<int64_t>(cell));
  }
  return cells;
}

void draw_cells(cairo_t* cr, const Heatmap& heatmap, const PanelLayout& layout) {
  std::vector<int64_t> col_of = cell_of_pixel(layout.col_edges), row_of = cell_of_pixel(layout.row_edges);
  const ColourScale& colours = layout.colours;
  paint_pixels(cr, layout.col_edges.front(), layout.row_edges.front(), static_cast<int>(col_of.size()),
               static_cast<int>(row_of.size()),
               [&](int x, int y) { return colours.colour(heatmap.values[row_of[y] * heatmap.cols + col_of[x]]); });
}

void draw_colour_bar(cairo_t* cr, const PanelLayout& layout) {
  const Rect& bar = layout.colour_bar;
  const ColourScale& colours = layout.colours;
  int height = static_cast<int>(bar.height);
  paint_pixels(cr, static_cast<int>(bar.x), static_cast<int>(bar.y), static_cast<int>(bar.width), height,
               [&](int, int y) {
                 double t = height > 1 ? 1 - static_cast<double>(y) / (height - 1) : 0.5;
                 return colours.colour(colours.lo + t * (colours.hi - colours.lo));
               });
  set_colour(cr, kInkColour);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, bar.x - 0.5, bar.y - 0.5, bar.width + 1, bar.height + 1);
  double right = bar.x + bar.width + 1;
  for (const Tick& tick : layout.colour_bar_ticks) {
    double y = std::clamp(std::floor(tick.position), bar.y, bar.y + bar.height - 1) + 0.5;
    cairo_move_to(cr, right, y);
    cairo_line_to(cr, right + kTickLength - 1, y);
  }
  cairo_stroke(cr);
  for (const Tick& tick : layout.colour_bar_ticks) {
    draw_text(cr, Font::kTick, tick.label, right + kTickLength - 1 + kTickGap, tick.position, HAlign::kLeft,
              VAlign::kMiddle);
  }
}

}  // namespace

void draw_heatmap(cairo_t* cr, const Heatmap& heatmap, const PanelLayout& layout) {
  draw_cells(cr, heatmap, layout);
  if (layout.colour_bar.width > 0) draw_colour_bar(cr, layout);
}

}  // namespace cabert::plot
