#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lib/core/errors.h"
#include "lib/plot/draw.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

constexpr double kLineWidth = 2;  // wide enough that a pixel on the line has the series colour exactly
constexpr double kMarkerRadius = 3;
constexpr double kLegendPadding = 6, kLegendSample = 24, kLegendInset = 8;
constexpr uint32_t kLegendBorder = 0xBBBBBB;

// The series in pixels, split at gaps (non-finite values, non-positive values on a log axis).
std::vector<std::vector<Point>> polylines(const Series& series, bool log_y, const PanelLayout& layout) {
  std::vector<std::vector<Point>> parts(1);
  for (size_t i = 0; i < series.x.size(); ++i) {
    double x = series.x[i], y = series.y[i];
    if (!std::isfinite(x) || !std::isfinite(y) || (log_y && !(y > 0))) {
      if (!parts.back().empty()) parts.emplace_back();
      continue;
    }
    parts.back().push_back(chart_pixel(layout, x, y));
  }
  if (parts.back().empty()) parts.pop_back();
  return parts;
}

void draw_grid(cairo_t* cr, const PanelLayout& layout) {
  const Rect& plot = layout.plot;
  set_colour(cr, kGridColour);
  cairo_set_line_width(cr, 1);
  for (const Tick& tick : layout.x_ticks) {
    cairo_move_to(cr, crisp(tick.position), plot.y);
    cairo_line_to(cr, crisp(tick.position), plot.y + plot.height);
  }
  for (const Tick& tick : layout.y_ticks) {
    cairo_move_to(cr, plot.x, crisp(tick.position));
    cairo_line_to(cr, plot.x + plot.width, crisp(tick.position));
  }
  cairo_stroke(cr);
}

void draw_marker(cairo_t* cr, Point point) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, point.x, point.y, kMarkerRadius, 0, 2 * M_PI);
  cairo_fill(cr);
}

void draw_series(cairo_t* cr, const LineChart& chart, const std::vector<std::vector<std::vector<Point>>>& lines,
                 const PanelLayout& layout) {
  const Rect& plot = layout.plot;
  cairo_save(cr);
  cairo_rectangle(cr, plot.x, plot.y, plot.width, plot.height);
  cairo_clip(cr);
  cairo_set_line_width(cr, kLineWidth);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (size_t s = 0; s < lines.size(); ++s) {
    set_colour(cr, series_colour(s));
    for (const auto& part : lines[s]) {
      cairo_move_to(cr, part[0].x, part[0].y);
      for (const Point& point : part) cairo_line_to(cr, point.x, point.y);
      cairo_stroke(cr);
      if (chart.markers || part.size() == 1) {
        for (const Point& point : part) draw_marker(cr, point);
      }
    }
  }
  cairo_restore(cr);
}

// How much of the data a rectangle would hide: line samples every 2 pixels that fall inside it.
size_t covered(const Rect& box, const std::vector<std::vector<std::vector<Point>>>& lines) {
  auto inside = [&](double x, double y) {
    return x >= box.x - 3 && x <= box.x + box.width + 3 && y >= box.y - 3 && y <= box.y + box.height + 3;
  };
  size_t count = 0;
  for (const auto& series : lines) {
    for (const auto& part : series) {
      for (size_t i = 0; i < part.size(); ++i) {
        Point a = part[i], b = i + 1 < part.size() ? part[i + 1] : part[i];
        int samples = std::max(1, static_cast<int>(std::ceil(std::hypot(b.x - a.x, b.y - a.y) / 2)));
        for (int k = 0; k < samples; ++k) {
          double t = static_cast<double>(k) / samples;
          count += inside(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y));
        }
      }
    }
  }
  return count;
}

void draw_legend(cairo_t* cr, const LineChart& chart, const std::vector<std::vector<std::vector<Point>>>& lines,
                 const PanelLayout& layout) {
  const Rect& plot = layout.plot;
  double line = line_height(cr, Font::kTick), row = line + 4;
  std::vector<std::string> labels;
  double label_width = 0;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const std::string& label = chart.series[s].label;
    labels.push_back(ellipsize(cr, Font::kTick, label.empty() ? str("series ", s + 1) : label, plot.width / 2));
    label_width = std::max(label_width, text_width(cr, Font::kTick, labels.back()));
  }
  double width = std::ceil(3 * kLegendPadding + kLegendSample + label_width);
  double height = std::ceil(2 * kLegendPadding + row * labels.size() - 4);
  // Top right, top left, bottom right, bottom left: the first that hides the least data.
  double left = plot.x + kLegendInset, right = plot.x + plot.width - kLegendInset - width;
  double top = plot.y + kLegendInset, bottom = plot.y + plot.height - kLegendInset - height;
  Rect best;
  size_t best_cover = SIZE_MAX;
  for (Point corner : {Point{right, top}, Point{left, top}, Point{right, bottom}, Point{left, bottom}}) {
    Rect box{std::floor(corner.x), std::floor(corner.y), width, height};
    size_t cover = covered(box, lines);
    if (cover < best_cover) {
      best = box;
      best_cover = cover;
    }
  }
  cairo_save(cr);  // a legend taller or wider than the plot area (dozens of series) is cut at its frame
  cairo_rectangle(cr, plot.x, plot.y, plot.width, plot.height);
  cairo_clip(cr);
  cairo_rectangle(cr, best.x + 0.5, best.y + 0.5, best.width, best.height);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
  cairo_fill_preserve(cr);
  set_colour(cr, kLegendBorder);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (size_t s = 0; s < labels.size(); ++s) {
    double y = best.y + kLegendPadding + row * s + line / 2;
    double x = best.x + kLegendPadding;
    set_colour(cr, series_colour(s));
    cairo_set_line_width(cr, kLineWidth);
    cairo_move_to(cr, x, y);
    cairo_line_to(cr, x + kLegendSample, y);
    cairo_stroke(cr);
    if (chart.markers) draw_marker(cr, {x + kLegendSample / 2, y});
    set_colour(cr, kInkColour);
    draw_text(cr, Font::kTick, labels[s], x + kLegendSample + kLegendPadding, y, HAlign::kLeft, VAlign::kMiddle);
  }
  cairo_restore(cr);
}

}  // namespace

void draw_line_chart(cairo_t* cr, const LineChart& chart, const PanelLayout& layout) {
  std::vector<std::vector<std::vector<Point>>> lines;
  for (const Series& series : chart.series) lines.push_back(polylines(series, chart.log_y, layout));
  draw_grid(cr, layout);
  draw_series(cr, chart, lines, layout);
  draw_frame_and_ticks(cr, layout);
  bool labelled =
      std::any_of(chart.series.begin(), chart.series.end(), [](const Series& s) { return !s.label.empty(); });
  if (chart.series.size() > 1 || labelled) draw_legend(cr, chart, lines, layout);
}

}  // namespace cabert::plot
