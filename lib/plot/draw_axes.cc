#include <algorithm>
#include <cmath>

#include "lib/plot/draw.h"
#include "lib/plot/text.h"

namespace cabert::plot {

void draw_frame_and_ticks(cairo_t* cr, const PanelLayout& layout) {
  const Rect& plot = layout.plot;
  set_colour(cr, kInkColour);
  cairo_set_line_width(cr, 1);
  // The frame lies on the pixels just outside the data rectangle.
  cairo_rectangle(cr, plot.x - 0.5, plot.y - 0.5, plot.width + 1, plot.height + 1);
  double below = plot.y + plot.height + 1;  // first pixel row under the frame
  for (const Tick& tick : layout.x_ticks) {
    cairo_move_to(cr, crisp(tick.position), below);
    cairo_line_to(cr, crisp(tick.position), below + kTickLength);
  }
  for (const Tick& tick : layout.y_ticks) {
    cairo_move_to(cr, plot.x - 1, crisp(tick.position));
    cairo_line_to(cr, plot.x - 1 - kTickLength, crisp(tick.position));
  }
  cairo_stroke(cr);

  double label_y = below + kTickLength + kTickGap;
  for (const Tick& tick : layout.x_ticks) {
    switch (layout.x_angle) {
      case LabelAngle::kHorizontal:
        draw_text(cr, Font::kTick, tick.label, tick.position, label_y, HAlign::kCentre, VAlign::kTop);
        break;
      case LabelAngle::kDiagonal:
        draw_text(cr, Font::kTick, tick.label, tick.position, label_y, HAlign::kRight, VAlign::kMiddle, -45);
        break;
      case LabelAngle::kVertical:
        draw_text(cr, Font::kTick, tick.label, tick.position, label_y, HAlign::kRight, VAlign::kMiddle, -90);
        break;
    }
  }
  double label_x = plot.x - 1 - kTickLength - kTickGap;
  for (const Tick& tick : layout.y_ticks) {
    draw_text(cr, Font::kTick, tick.label, label_x, tick.position, HAlign::kRight, VAlign::kMiddle);
  }
}

void draw_panel_titles(cairo_t* cr, const std::string& title, const std::string& x_label, const std::string& y_label,
                       const PanelLayout& layout) {
  const Rect& plot = layout.plot;
  const Rect& cell = layout.cell;
  set_colour(cr, kInkColour);
  double centre = plot.x + plot.width / 2;
  if (!title.empty()) {
    std::string text = ellipsize(cr, Font::kPanelTitle, title, cell.width - 2 * kPadding);
    // Centred over the data, but kept inside the cell.
    double half = text_width(cr, Font::kPanelTitle, text) / 2;
    double x = std::clamp(centre, cell.x + kPadding + half, cell.x + cell.width - kPadding - half);
    draw_text(cr, Font::kPanelTitle, text, x, layout.title_y, HAlign::kCentre, VAlign::kTop);
  }
  if (!x_label.empty()) {
    std::string text = ellipsize(cr, Font::kAxisTitle, x_label, cell.width - 2 * kPadding);
    double half = text_width(cr, Font::kAxisTitle, text) / 2;
    double x = std::clamp(centre, cell.x + kPadding + half, cell.x + cell.width - kPadding - half);
    draw_text(cr, Font::kAxisTitle, text, x, layout.x_title_y, HAlign::kCentre, VAlign::kTop);
  }
  if (!y_label.empty()) {
    std::string text = ellipsize(cr, Font::kAxisTitle, y_label, cell.height - 2 * kPadding);
    double half = text_width(cr, Font::kAxisTitle, text) / 2;
    double y = std::clamp(plot.y + plot.height / 2, cell.y + kPadding + half, cell.y + cell.height - kPadding - half);
    draw_text(cr, Font::kAxisTitle, text, layout.y_title_x, y, HAlign::kCentre, VAlign::kTop, -90);
  }
}

void draw_panel(cairo_t* cr, const Panel& panel, const PanelLayout& layout) {
  if (const auto* heatmap = std::get_if<Heatmap>(&panel.content)) {
    draw_heatmap(cr, *heatmap, layout);
    draw_frame_and_ticks(cr, layout);
    draw_panel_titles(cr, panel.title, heatmap->x_label, heatmap->y_label, layout);
  } else {
    const auto& chart = std::get<LineChart>(panel.content);
    draw_line_chart(cr, chart, layout);
    draw_panel_titles(cr, panel.title, chart.x_label, chart.y_label, layout);
  }
}

}  // namespace cabert::plot
