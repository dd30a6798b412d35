// Drawing a laid-out panel onto a Cairo context: the common chrome (frame, ticks, tick labels, titles) and
// the content of each kind of panel. Everything is placed by layout.h; nothing here measures margins.
#pragma once

#include <cairo.h>

#include <cmath>

#include "lib/plot/figure.h"
#include "lib/plot/layout.h"

namespace cabert::plot {

inline constexpr uint32_t kInkColour = 0x1A1A1A;   // text, frame, tick marks
inline constexpr uint32_t kGridColour = 0xE8E8E8;  // line chart grid lines

// Centre of the pixel that holds `position`, so that 1-pixel lines are crisp.
inline double crisp(double position) { return std::floor(position) + 0.5; }

void draw_panel(cairo_t* cr, const Panel& panel, const PanelLayout& layout);

// Parts of draw_panel.
void draw_frame_and_ticks(cairo_t* cr, const PanelLayout& layout);
void draw_panel_titles(cairo_t* cr, const std::string& title, const std::string& x_label, const std::string& y_label,
                       const PanelLayout& layout);
void draw_heatmap(cairo_t* cr, const Heatmap& heatmap, const PanelLayout& layout);
// Grid, series, then the frame and ticks, then the legend on top.
void draw_line_chart(cairo_t* cr, const LineChart& chart, const PanelLayout& layout);

// A w x h RGB24 image filled pixel by pixel, painted 1:1 at an integer position (exact colours).
template <typename PixelColour>
void paint_pixels(cairo_t* cr, int x, int y, int width, int height, PixelColour colour_at) {
  if (width <= 0 || height <= 0) return;
  cairo_surface_t* image = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  if (cairo_surface_status(image) != CAIRO_STATUS_SUCCESS) {  // out of memory: the figure's status tells
    cairo_surface_destroy(image);
    return;
  }
  unsigned char* data = cairo_image_surface_get_data(image);
  int stride = cairo_image_surface_get_stride(image);
  cairo_surface_flush(image);
  for (int row = 0; row < height; ++row) {
    auto* pixels = reinterpret_cast<uint32_t*>(data + static_cast<size_t>(row) * stride);
    for (int col = 0; col < width; ++col) pixels[col] = colour_at(col, row);
  }
  cairo_surface_mark_dirty(image);
  cairo_save(cr);
  cairo_set_source_surface(cr, image, x, y);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_rectangle(cr, x, y, width, height);
  cairo_fill(cr);
  cairo_restore(cr);
  cairo_surface_destroy(image);
}

}  // namespace cabert::plot
